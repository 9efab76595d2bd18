// Scheduler workloads; twins of bench/sched_bench.cpp.
package main

import (
	"runtime"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"time"
)

func init() {
	register("spawn_single", "1 spawner, 1M goroutines each calling wg.Done; ns/goroutine", nil, spawnSingle)
	register("spawn_chain", "chain of 1M goroutines, each spawning the next; ns/goroutine", nil, spawnChain)
	register("gosched", "2 goroutines per P yielding, 2M yields; ns/yield", nil, gosched)
	register("parked", "1M goroutines parked on a WaitGroup; RSS/goroutine and creation time",
		[]string{"parked_rss", "parked_create"}, parked)
	register("uneven_work", "2 uneven batches (100, 150) of CPU-bound goroutines; ms", nil, unevenWork)
	register("chain", "100k goroutines chained by unbuffered channels; creation and drain, ms",
		[]string{"chain_create", "chain_drain"}, chain)
	register("goroutines", "Go's test/chan/goroutines.go as written (100k, value enters at the last-created end); creation and drain, ms",
		[]string{"goroutines_create", "goroutines_drain"}, goroutines)
	register("idle_release", "1M goroutines parked past the idle threshold on one channel; bytes/goroutine, then released by close, ms",
		[]string{"idle_rss_per_g", "idle_wake"}, idleRelease)
	register("mass_release", "1M goroutines parked on one channel, released by close; ms, bytes/goroutine",
		[]string{"mass_create", "mass_rss_per_g"}, massRelease)
}

// Go's BenchmarkCreateGoroutinesSingle.
func spawnSingle() {
	const n = 1000000
	warmupScheduler(runtime.GOMAXPROCS(0))
	var wg sync.WaitGroup
	t0 := time.Now()
	wg.Add(n)
	for i := 0; i < n; i++ {
		go func() {
			wg.Done()
		}()
	}
	wg.Wait()
	result("spawn_single", float64(time.Since(t0).Nanoseconds())/n, "ns/goroutine")
}

func spawnChainLink(n int, wg *sync.WaitGroup) {
	if n == 0 {
		wg.Done()
		return
	}
	go spawnChainLink(n-1, wg)
}

// Go's BenchmarkCreateGoroutines (one chain).
func spawnChain() {
	const n = 1000000
	var wg sync.WaitGroup
	t0 := time.Now()
	wg.Add(1)
	go spawnChainLink(n-1, &wg)
	wg.Wait()
	result("spawn_chain", float64(time.Since(t0).Nanoseconds())/n, "ns/goroutine")
}

func gosched() {
	const total = 2000000
	g := 2 * runtime.GOMAXPROCS(0)
	per := total / g
	var wg sync.WaitGroup
	t0 := time.Now()
	wg.Add(g)
	for i := 0; i < g; i++ {
		go func() {
			for j := 0; j < per; j++ {
				runtime.Gosched()
			}
			wg.Done()
		}()
	}
	wg.Wait()
	result("gosched", float64(time.Since(t0).Nanoseconds())/float64(per*g), "ns/yield")
}

func parked() {
	const n = 1000000
	var release, arrived, finished sync.WaitGroup
	release.Add(1)
	arrived.Add(n)
	finished.Add(n)
	rss0 := rssBytes()
	t0 := time.Now()
	for i := 0; i < n; i++ {
		go func() {
			arrived.Done()
			release.Wait()
			finished.Done()
		}()
	}
	arrived.Wait()
	createNs := time.Since(t0).Nanoseconds()
	rss1 := rssBytes()
	live := runtime.NumGoroutine()
	release.Done()
	finished.Wait()
	note("num_goroutine while parked: %d, rss before %d MiB, parked %d MiB", live, rss0>>20, rss1>>20)
	result("parked_rss", (float64(rss1)-float64(rss0))/n, "bytes/goroutine")
	result("parked_create", float64(createNs)/1e6, "ms")
}

func unevenWork() {
	const batches = 2
	const iters = 1 << 20
	total := 0
	for b := 0; b < batches; b++ {
		total += 100 + b*50
	}
	var wg sync.WaitGroup
	var sum uint64
	t0 := time.Now()
	wg.Add(total)
	for b := 0; b < batches; b++ {
		go func(b int) {
			count := 100 + b*50
			for j := 0; j < count; j++ {
				go func(seed uint64) {
					atomic.AddUint64(&sum, leafWork(iters, seed))
					wg.Done()
				}(uint64(b*1000 + j))
			}
		}(b)
	}
	wg.Wait()
	ms := float64(time.Since(t0).Nanoseconds()) / 1e6
	check("uneven_work", atomic.LoadUint64(&sum))
	result("uneven_work", ms, "ms")
}

// Go's test/chan/goroutines.go, timed in two parts (see sched_bench.cpp).
func chain() {
	const n = 100000
	leftmost := make(chan int)
	left := leftmost
	t0 := time.Now()
	for i := 0; i < n; i++ {
		right := make(chan int)
		go func(left, right chan int) { right <- 1 + <-left }(left, right)
		left = right
	}
	create := time.Since(t0)
	t1 := time.Now()
	leftmost <- 0
	v := <-left
	drain := time.Since(t1)
	check("chain", uint64(v))
	result("chain_create", float64(create.Nanoseconds())/1e6, "ms")
	result("chain_drain", float64(drain.Nanoseconds())/1e6, "ms")
}

// Go's test/chan/goroutines.go as written, timed in two parts (see
// sched_bench.cpp).
func goroutines() {
	const n = 100000
	leftmost := make(chan int)
	right := leftmost
	left := leftmost
	t0 := time.Now()
	for i := 0; i < n; i++ {
		right = make(chan int)
		go func(left, right chan int) { left <- <-right }(left, right)
		left = right
	}
	create := time.Since(t0)
	t1 := time.Now()
	go func(c chan int) { c <- 1 }(right)
	v := <-leftmost
	drain := time.Since(t1)
	check("goroutines", uint64(v))
	result("goroutines_create", float64(create.Nanoseconds())/1e6, "ms")
	result("goroutines_drain", float64(drain.Nanoseconds())/1e6, "ms")
}

// n goroutines that count themselves in arrived, park on gate until it is
// closed, then count themselves in released and finished; parkCrowd
// returns once all of them have arrived (see sched_bench.cpp's
// parked_crowd).
type crowd struct {
	gate              chan struct{}
	arrived, finished sync.WaitGroup
	released          uint64
}

func parkCrowd(n int) *crowd {
	c := &crowd{gate: make(chan struct{})}
	c.arrived.Add(n)
	c.finished.Add(n)
	for i := 0; i < n; i++ {
		go func() {
			c.arrived.Done()
			<-c.gate
			atomic.AddUint64(&c.released, 1)
			c.finished.Done()
		}()
	}
	c.arrived.Wait()
	return c
}

// release closes the gate and waits until every goroutine has finished.
func (c *crowd) release() time.Duration {
	t := time.Now()
	close(c.gate)
	c.finished.Wait()
	return time.Since(t)
}

// RSS (statm) and page tables (VmPTE) at one moment.
type memoryMark struct{ rss, pte uint64 }

func markMemory() memoryMark { return memoryMark{rssBytes(), pageTableBytes()} }

// perGoroutineSince: RSS + page tables grown since before, per goroutine;
// a note splits the two.
func (m memoryMark) perGoroutineSince(before memoryMark, n int, metric string) float64 {
	rssPerG := (float64(m.rss) - float64(before.rss)) / float64(n)
	ptePerG := (float64(m.pte) - float64(before.pte)) / float64(n)
	note("%s: rss %.0f + page tables %.0f bytes/goroutine; rss before %d MiB, then %d MiB; page tables then %d MiB",
		metric, rssPerG, ptePerG, before.rss>>20, m.rss>>20, m.pte>>20)
	return rssPerG + ptePerG
}

// 1M goroutines parked on one channel, released by close; mass_rss_per_g is
// RSS (statm) plus page tables (VmPTE) grown per goroutine while all are
// parked (see sched_bench.cpp).
func massRelease() {
	const n = 1000000
	before := markMemory()
	t0 := time.Now()
	crowd := parkCrowd(n)
	create := time.Since(t0)
	parked := markMemory()
	release := crowd.release()
	perG := parked.perGoroutineSince(before, n, "mass_rss_per_g")
	check("mass_release", atomic.LoadUint64(&crowd.released))
	result("mass_create", float64(create.Nanoseconds())/1e6, "ms")
	result("mass_release", float64(release.Nanoseconds())/1e6, "ms")
	result("mass_rss_per_g", perG, "bytes/goroutine")
}

// 1M goroutines parked on one channel past the idle threshold (see
// sched_bench.cpp): Go gets a GC and FreeOSMemory, which shrink the parked
// stacks and return free memory, before its RSS is read.
func idleRelease() {
	const n = 1000000
	before := markMemory()
	crowd := parkCrowd(n)
	tIdle := time.Now()
	runtime.GC()
	debug.FreeOSMemory()
	note("idle_release: GC and FreeOSMemory took %.1f s", time.Since(tIdle).Seconds())
	settled := markMemory()
	wake := crowd.release()
	perG := settled.perGoroutineSince(before, n, "idle_rss_per_g")
	check("idle_release", atomic.LoadUint64(&crowd.released))
	result("idle_rss_per_g", perG, "bytes/goroutine")
	result("idle_wake", float64(wake.Nanoseconds())/1e6, "ms")
}
