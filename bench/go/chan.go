// Channel and select workloads; twins of bench/chan_bench.cpp.
//
// skynet (atemerev/skynet), an unbuffered ping-pong, and standalone ports of
// the channel benchmarks in Go 1.19's src/runtime/chan_test.go with a fixed
// iteration count in place of b.N; ns/op is wall time / that count.
// RunParallel bodies run as GOMAXPROCS goroutines sharing the count evenly.
package main

import (
	"bufio"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

func init() {
	register("skynet", "skynet: 1M leaves, fan-out 10, unbuffered channel per node; wall ms and peak RSS (VmHWM)",
		[]string{"skynet_ms", "skynet_rss_mb"}, skynet)
	register("pingpong", "unbuffered ping-pong between 2 goroutines, 2M round trips; ns/roundtrip", nil, pingpong)
	register("chan_sync", "Go's ChanSync: 2 goroutines exchanging on an unbuffered channel, 4M messages; ns/op", nil, chanSync)
	register("chan_prodcons_0", "Go's ChanProdCons0: P producers, P consumers, unbuffered, 5M messages; ns/op", nil,
		func() { chanProdCons("chan_prodcons_0", 0, 5000000) })
	register("chan_prodcons_10", "Go's ChanProdCons10: P producers, P consumers, capacity 10, 10M messages; ns/op", nil,
		func() { chanProdCons("chan_prodcons_10", 10, 10000000) })
	register("chan_prodcons_100", "Go's ChanProdCons100: P producers, P consumers, capacity 100, 10M messages; ns/op", nil,
		func() { chanProdCons("chan_prodcons_100", 100, 10000000) })
	register("select_uncontended", "Go's SelectUncontended: 2-case select on private buffered channels, P workers, 20M selects; ns/op", nil, selectUncontended)
	register("select_sync_contended", "Go's SelectSyncContended: 3-case select senders and receivers on shared unbuffered channels, 1M receives; ns/op", nil, selectSyncContended)
	register("select_prodcons", "Go's SelectProdCons (timer case replaced by a never-ready channel): P producers, P consumers, 3-case selects, 100 units of local work, 4M messages; ns/op", nil, selectProdCons)
	register("chan_popular", "Go's ChanPopular: 1000 goroutines selecting on a shared channel and their own, 2000 ops; us/op", nil, chanPopular)
}

// peakRSSBytes reads VmHWM from /proc/self/status.
func peakRSSBytes() uint64 {
	f, err := os.Open("/proc/self/status")
	if err != nil {
		return 0
	}
	defer f.Close()
	s := bufio.NewScanner(f)
	for s.Scan() {
		line := s.Text()
		if strings.HasPrefix(line, "VmHWM:") {
			fields := strings.Fields(line[len("VmHWM:"):])
			if len(fields) > 0 {
				kb, err := strconv.ParseUint(fields[0], 10, 64)
				if err == nil {
					return kb * 1024
				}
			}
		}
	}
	return 0
}

// atemerev/skynet's go/skynet.go.
func skynetNode(c chan int, num int, size int, div int) {
	if size == 1 {
		c <- num
		return
	}
	rc := make(chan int)
	var sum int
	for i := 0; i < div; i++ {
		subNum := num + i*(size/div)
		go skynetNode(rc, subNum, size/div, div)
	}
	for i := 0; i < div; i++ {
		sum += <-rc
	}
	c <- sum
}

func skynet() {
	c := make(chan int)
	t0 := time.Now()
	go skynetNode(c, 0, 1000000, 10)
	sum := <-c
	ms := float64(time.Since(t0).Nanoseconds()) / 1e6
	check("skynet", uint64(sum))
	result("skynet_ms", ms, "ms")
	result("skynet_rss_mb", float64(peakRSSBytes())/(1024*1024), "MiB")
}

func pingpong() {
	const n = 2000000
	ping := make(chan int64)
	pong := make(chan int64)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		for v := range ping {
			pong <- v
		}
		wg.Done()
	}()
	var sum uint64
	t0 := time.Now()
	for i := int64(0); i < n; i++ {
		ping <- i
		sum += uint64(<-pong)
	}
	ns := float64(time.Since(t0).Nanoseconds())
	close(ping)
	wg.Wait()
	check("pingpong", sum)
	result("pingpong", ns/n, "ns/roundtrip")
}

// benchmarkChanSync(b, 0) from chan_test.go.
func chanSync() {
	const callsPerSched = 1000
	const procs = 2
	const ops = 4000000
	N := int32(ops / callsPerSched / procs * procs)
	c := make(chan bool, procs)
	myc := make(chan int)
	var received uint64
	t0 := time.Now()
	for p := 0; p < procs; p++ {
		go func() {
			var got uint64
			for {
				i := atomic.AddInt32(&N, -1)
				if i < 0 {
					break
				}
				for g := 0; g < callsPerSched; g++ {
					if i%2 == 0 {
						<-myc
						got++
						myc <- 0
					} else {
						myc <- 0
						<-myc
						got++
					}
				}
			}
			atomic.AddUint64(&received, got)
			c <- true
		}()
	}
	for p := 0; p < procs; p++ {
		<-c
	}
	ns := float64(time.Since(t0).Nanoseconds())
	check("chan_sync", atomic.LoadUint64(&received))
	result("chan_sync", ns/ops, "ns/op")
}

// benchmarkChanProdCons(b, chanSize, 0) from chan_test.go.
func chanProdCons(name string, chanSize int, ops int) {
	const callsPerSched = 1000
	const localWork = 0
	procs := runtime.GOMAXPROCS(-1)
	N := int32(ops / callsPerSched)
	c := make(chan bool, 2*procs)
	myc := make(chan int, chanSize)
	var received uint64
	t0 := time.Now()
	for p := 0; p < procs; p++ {
		go func() {
			foo := 0
			for atomic.AddInt32(&N, -1) >= 0 {
				for g := 0; g < callsPerSched; g++ {
					for i := 0; i < localWork; i++ {
						foo *= 2
						foo /= 2
					}
					myc <- 1
				}
			}
			myc <- 0
			c <- foo == 42
		}()
		go func() {
			foo := 0
			var got uint64
			for {
				v := <-myc
				if v == 0 {
					break
				}
				got++
				for i := 0; i < localWork; i++ {
					foo *= 2
					foo /= 2
				}
			}
			atomic.AddUint64(&received, got)
			c <- foo == 42
		}()
	}
	for p := 0; p < procs; p++ {
		<-c
		<-c
	}
	ns := float64(time.Since(t0).Nanoseconds())
	check(name, atomic.LoadUint64(&received))
	result(name, ns/float64(ops), "ns/op")
}

// BenchmarkSelectUncontended from chan_test.go.
func selectUncontended() {
	const ops = 20000000
	procs := runtime.GOMAXPROCS(0)
	per := ops / procs
	var wg sync.WaitGroup
	var first uint64
	t0 := time.Now()
	wg.Add(procs)
	for p := 0; p < procs; p++ {
		go func() {
			myc1 := make(chan int, 1)
			myc2 := make(chan int, 1)
			myc1 <- 0
			var n1 uint64
			for j := 0; j < per; j++ {
				select {
				case <-myc1:
					n1++
					myc2 <- 0
				case <-myc2:
					myc1 <- 0
				}
			}
			atomic.AddUint64(&first, n1)
			wg.Done()
		}()
	}
	wg.Wait()
	ns := float64(time.Since(t0).Nanoseconds())
	check("select_uncontended", atomic.LoadUint64(&first))
	result("select_uncontended", ns/float64(per*procs), "ns/op")
}

// BenchmarkSelectSyncContended from chan_test.go.
func selectSyncContended() {
	const ops = 1000000
	procs := runtime.GOMAXPROCS(0)
	per := ops / procs
	myc1 := make(chan int)
	myc2 := make(chan int)
	myc3 := make(chan int)
	done := make(chan int)
	var workers, senders sync.WaitGroup
	var received uint64
	t0 := time.Now()
	workers.Add(procs)
	senders.Add(procs)
	for p := 0; p < procs; p++ {
		go func() {
			go func() {
				for {
					select {
					case myc1 <- 0:
					case myc2 <- 0:
					case myc3 <- 0:
					case <-done:
						senders.Done()
						return
					}
				}
			}()
			var got uint64
			for j := 0; j < per; j++ {
				select {
				case <-myc1:
				case <-myc2:
				case <-myc3:
				}
				got++
			}
			atomic.AddUint64(&received, got)
			workers.Done()
		}()
	}
	workers.Wait()
	ns := float64(time.Since(t0).Nanoseconds())
	close(done)
	senders.Wait()
	check("select_sync_contended", atomic.LoadUint64(&received))
	result("select_sync_contended", ns/float64(per*procs), "ns/op")
}

// BenchmarkSelectProdCons from chan_test.go.
// DEVIATION from Go: the original's third case is
// `mytimer := time.After(time.Hour)`, a timer that never fires during the
// run; goro has no timers yet, so BOTH twins use a per-goroutine channel that
// no one ever sends on instead (a never-ready case that select still has to
// enqueue on and dequeue from). myclose is never closed, as in Go.
func selectProdCons() {
	const callsPerSched = 1000
	const ops = 4000000
	procs := runtime.GOMAXPROCS(-1)
	N := int32(ops / callsPerSched)
	c := make(chan bool, 2*procs)
	myc := make(chan int, 128)
	myclose := make(chan bool)
	var received uint64
	t0 := time.Now()
	for p := 0; p < procs; p++ {
		go func() {
			// Producer: sends to myc.
			foo := 0
			mytimer := make(chan bool) // stands in for time.After(time.Hour)
			for atomic.AddInt32(&N, -1) >= 0 {
				for g := 0; g < callsPerSched; g++ {
					// Model some local work.
					for i := 0; i < 100; i++ {
						foo *= 2
						foo /= 2
					}
					select {
					case myc <- 1:
					case <-mytimer:
					case <-myclose:
					}
				}
			}
			myc <- 0
			c <- foo == 42
		}()
		go func() {
			// Consumer: receives from myc.
			foo := 0
			var got uint64
			mytimer := make(chan bool) // stands in for time.After(time.Hour)
		loop:
			for {
				select {
				case v := <-myc:
					if v == 0 {
						break loop
					}
					got++
				case <-mytimer:
				case <-myclose:
				}
				// Model some local work.
				for i := 0; i < 100; i++ {
					foo *= 2
					foo /= 2
				}
			}
			atomic.AddUint64(&received, got)
			c <- foo == 42
		}()
	}
	for p := 0; p < procs; p++ {
		<-c
		<-c
	}
	ns := float64(time.Since(t0).Nanoseconds())
	check("select_prodcons", atomic.LoadUint64(&received))
	result("select_prodcons", ns/ops, "ns/op")
}

// BenchmarkChanPopular from chan_test.go.
func chanPopular() {
	const n = 1000
	const ops = 2000
	c := make(chan bool)
	var a []chan bool
	var wg sync.WaitGroup
	var received uint64
	t0 := time.Now()
	wg.Add(n)
	for j := 0; j < n; j++ {
		d := make(chan bool)
		a = append(a, d)
		go func() {
			var got uint64
			for i := 0; i < ops; i++ {
				select {
				case <-c:
				case <-d:
					got++
				}
			}
			atomic.AddUint64(&received, got)
			wg.Done()
		}()
	}
	for i := 0; i < ops; i++ {
		for _, d := range a {
			d <- true
		}
	}
	wg.Wait()
	ns := float64(time.Since(t0).Nanoseconds())
	check("chan_popular", atomic.LoadUint64(&received))
	result("chan_popular", ns/1e3/ops, "us/op")
}
