// Command goclientbench is the Go twin of goro_clientlib_bench
// (bench/clientlib/client_bench.cpp): N goroutines, each with its own
// connection, run PostgreSQL queries (database/sql + lib/pq) or Redis
// SET/GET round trips (redigo) back to back for a fixed time.
//
//	goclientbench pg|redis [-conns N] [-duration S] [-pg CONNINFO] [-redis-sock PATH]
//
// Every connection is opened first, concurrently, and makes one warm-up
// operation; then the clock starts and
// every goroutine runs operations until the shared deadline. pg: one
// `SELECT $1::int` with the answer checked (binary_parameters=yes, so that
// lib/pq sends Parse/Bind/Describe/Execute/Sync in one round trip, as
// libpq's PQexecParams does); redis: SET and GET of the connection's own
// key alternately, answers checked. Prints the same RESULT lines as the
// C++ side: rate, p50_us, p99_us, hwm_kib, threads_max, cpu_us_per_op,
// minflt, majflt, drain_ms, connect_ms, max_us, conn_ops_min,
// conn_ops_mean, starved, errors.
//
// Built in GOPATH mode with Debian's packaged sources (no module proxy):
//
//	GO111MODULE=off GOPATH=/usr/share/gocode go build -o goclientbench .
package main

import (
	"context"
	"database/sql"
	"flag"
	"fmt"
	"math"
	"math/bits"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/gomodule/redigo/redis"
	_ "github.com/lib/pq"
)

// Latency histogram with the C++ side's layout: 16 buckets per power of
// two of nanoseconds, counters bumped atomically.
const (
	subBits = 4
	buckets = (64 - subBits + 1) << subBits
)

var hist [buckets]uint64

func bucket(ns uint64) int {
	if ns < 1<<subBits {
		return int(ns)
	}
	msb := 63 - bits.LeadingZeros64(ns)
	shift := msb - subBits
	return (shift+1)<<subBits + int((ns>>uint(shift))&(1<<subBits-1))
}

func bucketValue(i int) float64 {
	if i < 1<<subBits {
		return float64(i)
	}
	shift := i>>subBits - 1
	lo := float64(uint64(1<<subBits|i&(1<<subBits-1))) * float64(uint64(1)<<uint(shift))
	return lo + float64(uint64(1)<<uint(shift))/2
}

func quantileUs(q float64) float64 {
	var total uint64
	for i := range hist {
		total += atomic.LoadUint64(&hist[i])
	}
	if total == 0 {
		return 0
	}
	rank := uint64(q * float64(total))
	if rank >= total {
		rank = total - 1
	}
	var seen uint64
	for i := range hist {
		seen += atomic.LoadUint64(&hist[i])
		if seen > rank {
			return bucketValue(i) / 1000
		}
	}
	return 0
}

var (
	ops      uint64 // completed by the deadline
	opsAll   uint64 // the late ones too
	errCount uint64
	starved  uint64 // connections that did no operation
	// The fewest operations one connection completed in the window.
	connMin uint64 = math.MaxUint64
)

func result(metric string, value float64, unit string) {
	fmt.Printf("RESULT %s %.6g %s\n", metric, value, unit)
}

// measure runs op until the deadline, recording every latency; the rate
// counts the operations completed by the deadline.
func measure(deadline time.Time, op func() bool) {
	var n, all uint64
	t0 := time.Now()
	for t0.Before(deadline) {
		if !op() {
			atomic.AddUint64(&errCount, 1)
			break
		}
		t1 := time.Now()
		atomic.AddUint64(&hist[bucket(uint64(t1.Sub(t0)))], 1)
		if !t1.After(deadline) {
			n++ // completed within the measured window
		}
		all++
		t0 = t1
	}
	atomic.AddUint64(&ops, n)
	atomic.AddUint64(&opsAll, all)
	if n == 0 {
		atomic.AddUint64(&starved, 1)
	}
	for {
		m := atomic.LoadUint64(&connMin)
		if n >= m || atomic.CompareAndSwapUint64(&connMin, m, n) {
			break
		}
	}
}

// cpuSeconds is the process's user + system CPU time.
func cpuSeconds() float64 {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()).Seconds()
}

func threadCount() int {
	f, err := os.Open("/proc/self/task")
	if err != nil {
		return 0
	}
	defer f.Close()
	names, _ := f.Readdirnames(-1)
	return len(names)
}

// start is closed by main once every connection is open; deadline is
// written before it is closed.
var (
	start    = make(chan struct{})
	deadline time.Time
)

func pgWorker(db *sql.DB, id int, connected *sync.WaitGroup) {
	ctx := context.Background()
	c, err := db.Conn(ctx)
	i := uint32(id) * 1000003
	op := func() bool {
		i++
		v := int(i & 0x3fffffff)
		var got int
		if err := c.QueryRowContext(ctx, "SELECT $1::int", v).Scan(&got); err != nil || got != v {
			fmt.Fprintf(os.Stderr, "pg query %d: %v (%d != %d)\n", id, err, got, v)
			return false
		}
		return true
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "pg connect %d: %v\n", id, err)
		atomic.AddUint64(&errCount, 1)
	} else if !op() { // warm-up: a fresh backend loads its caches
		err = fmt.Errorf("warm-up query failed")
		atomic.AddUint64(&errCount, 1)
	}
	connected.Done()
	<-start
	if c != nil {
		defer c.Close()
	}
	if err != nil {
		return
	}
	measure(deadline, op)
}

func redisWorker(sock string, id int, connected *sync.WaitGroup) {
	c, err := redis.Dial("unix", sock)
	key := "bench:" + strconv.Itoa(id)
	var i uint64
	val := "0"
	op := func() bool {
		set := i&1 == 0
		i++
		if set {
			val = strconv.FormatUint(i, 10)
			r, err := redis.String(c.Do("SET", key, val))
			if err != nil || r != "OK" {
				fmt.Fprintf(os.Stderr, "redis SET %d: %v\n", id, err)
				return false
			}
			return true
		}
		r, err := redis.String(c.Do("GET", key))
		if err != nil || r != val {
			fmt.Fprintf(os.Stderr, "redis GET %d: %v\n", id, err)
			return false
		}
		return true
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "redis connect %d: %v\n", id, err)
		atomic.AddUint64(&errCount, 1)
	} else if !op() { // warm-up, as on the pg side
		err = fmt.Errorf("warm-up failed")
		atomic.AddUint64(&errCount, 1)
	}
	connected.Done()
	<-start
	if err != nil {
		if c != nil {
			c.Close()
		}
		return
	}
	defer c.Close()
	measure(deadline, op)
}

func usage() {
	fmt.Fprintln(os.Stderr, "usage: goclientbench pg|redis [-conns N] [-duration S] [-pg CONNINFO] [-redis-sock PATH]")
	os.Exit(2)
}

func main() {
	if len(os.Args) < 2 || (os.Args[1] != "pg" && os.Args[1] != "redis") {
		usage()
	}
	kind := os.Args[1]
	fs := flag.NewFlagSet(kind, flag.ExitOnError)
	conns := fs.Int("conns", 100, "connections, one goroutine each")
	duration := fs.Float64("duration", 3, "measured seconds")
	pgInfo := fs.String("pg", os.Getenv("PG_CONNINFO"), "libpq-style connection string")
	redisSock := fs.String("redis-sock", os.Getenv("REDIS_SOCK"), "redis-server's Unix socket")
	fs.Parse(os.Args[2:])
	if *conns < 1 || *duration <= 0 {
		usage()
	}

	// Thread count sampler (a goroutine: it adds no thread of its own).
	var threadsMax int64
	stopSampler := make(chan struct{})
	samplerDone := make(chan struct{})
	go func() {
		defer close(samplerDone)
		tk := time.NewTicker(2 * time.Millisecond)
		defer tk.Stop()
		for {
			if n := int64(threadCount()); n > threadsMax {
				threadsMax = n
			}
			select {
			case <-stopSampler:
				return
			case <-tk.C:
			}
		}
	}()

	var db *sql.DB
	if kind == "pg" {
		var err error
		db, err = sql.Open("postgres", *pgInfo+" binary_parameters=yes")
		if err != nil {
			fmt.Fprintln(os.Stderr, "sql.Open:", err)
			os.Exit(1)
		}
		db.SetMaxOpenConns(*conns)
		db.SetMaxIdleConns(*conns)
	}
	var connected, finished sync.WaitGroup
	begin := time.Now()
	for i := 0; i < *conns; i++ {
		connected.Add(1)
		finished.Add(1)
		go func(i int) {
			defer finished.Done()
			if kind == "pg" {
				pgWorker(db, i, &connected)
			} else {
				redisWorker(*redisSock, i, &connected)
			}
		}(i)
	}
	connected.Wait()
	t0 := time.Now()
	cpu0 := cpuSeconds()
	deadline = t0.Add(time.Duration(*duration * float64(time.Second)))
	close(start)
	finished.Wait()
	end := time.Now()
	cpu1 := cpuSeconds()
	close(stopSampler)
	<-samplerDone
	if db != nil {
		db.Close()
	}

	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	measured := *duration
	n := atomic.LoadUint64(&ops)
	nAll := atomic.LoadUint64(&opsAll)
	fmt.Printf("# %s go: %d connections, %d operations in %.3f s\n", kind, *conns, n, measured)
	result("rate", float64(n)/measured, "ops/s")
	result("p50_us", quantileUs(0.50), "us")
	result("p99_us", quantileUs(0.99), "us")
	result("hwm_kib", float64(ru.Maxrss), "KiB")
	result("threads_max", float64(threadsMax), "count")
	perOp := 0.0
	if nAll > 0 {
		perOp = 1e6 * (cpu1 - cpu0) / float64(nAll)
	}
	result("cpu_us_per_op", perOp, "us")
	result("minflt", float64(ru.Minflt), "count")
	result("majflt", float64(ru.Majflt), "count")
	result("drain_ms", 1000*end.Sub(deadline).Seconds(), "ms")
	result("connect_ms", 1000*t0.Sub(begin).Seconds(), "ms")
	result("max_us", quantileUs(1.0), "us")
	cm := atomic.LoadUint64(&connMin)
	if cm == math.MaxUint64 {
		cm = 0
	}
	result("conn_ops_min", float64(cm), "count")
	result("conn_ops_mean", float64(n)/float64(*conns), "count")
	result("starved", float64(atomic.LoadUint64(&starved)), "count")
	result("errors", float64(atomic.LoadUint64(&errCount)), "count")
	if atomic.LoadUint64(&errCount) != 0 {
		os.Exit(1)
	}
}
