// Wake-up, timer and syscall workloads; twins of bench/time_bench.cpp.
//
// wakeup_spinning_<d>us and wakeup_syscall_<d>us are standalone ports of
// BenchmarkWakeupParallelSpinning and BenchmarkWakeupParallelSyscall in Go
// 1.19's src/runtime/proc_test.go, with a fixed round count instead of b.N
// (and run at GOMAXPROCS=1 too, where the benchmark skips itself).
package main

import (
	"fmt"
	"runtime"
	"sort"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
	"unsafe"
)

func init() {
	for _, w := range []struct {
		delay, spinRounds, syscallRounds int
	}{{0, 40000, 2000}, {1, 30000, 2000}, {5, 20000, 2000}, {20, 8000, 2000}, {100, 1500, 1500}} {
		w := w
		name := fmt.Sprintf("wakeup_spinning_%dus", w.delay)
		register(name, fmt.Sprintf("Go's WakeupParallelSpinning with delay %d us, %d rounds; ns/op", w.delay, w.spinRounds), nil,
			func() { wakeupParallel(name, time.Duration(w.delay)*time.Microsecond, w.spinRounds, spinFor) })
		sname := fmt.Sprintf("wakeup_syscall_%dus", w.delay)
		register(sname, fmt.Sprintf("Go's WakeupParallelSyscall with delay %d us, %d rounds; ns/op", w.delay, w.syscallRounds), nil,
			func() { wakeupParallel(sname, time.Duration(w.delay)*time.Microsecond, w.syscallRounds, sysNanosleep) })
	}
	register("sleepers_lateness", "100k goroutines each sleeping a random 1-10 ms; p50 and p99 wake-up lateness in us",
		[]string{"sleep_late_p50_us", "sleep_late_p99_us"}, sleepersLateness)
	register("timer_create_stop", "create a 1 h timer and stop it, 1M times; ns/op", nil, timerCreateStop)
	register("syscall_compute", "P compute goroutines next to 4P goroutines in blocking 1 ms sleeps; compute rate kept vs without blockers (fraction, higher is better)",
		[]string{"syscall_kept"}, syscallCompute)
}

// sysNanosleep is runtime_linux_test.go's: a blocking nanosleep system call
// (not time.Sleep, which would park the goroutine), restarted after EINTR.
func sysNanosleep(d time.Duration) {
	ts := syscall.NsecToTimespec(d.Nanoseconds())
	for {
		_, _, errno := syscall.Syscall(syscall.SYS_NANOSLEEP,
			uintptr(unsafe.Pointer(&ts)), uintptr(unsafe.Pointer(&ts)), 0)
		if errno != syscall.EINTR {
			return
		}
	}
}

func wakeupParallel(name string, delay time.Duration, rounds int, spend func(time.Duration)) {
	const wakeDelay = 5 * time.Microsecond
	ping, pong := make(chan struct{}), make(chan struct{})
	start := make(chan struct{})
	done := make(chan struct{})
	var ops uint64
	go func() {
		<-start
		for i := 0; i < rounds; i++ {
			spend(delay + wakeDelay) // sender
			ping <- struct{}{}
			spend(delay) // receiver
			<-pong
			atomic.AddUint64(&ops, 1)
		}
		done <- struct{}{}
	}()
	go func() {
		for i := 0; i < rounds; i++ {
			spend(delay) // receiver
			<-ping
			spend(delay + wakeDelay) // sender
			pong <- struct{}{}
			atomic.AddUint64(&ops, 1)
		}
		done <- struct{}{}
	}()
	t0 := time.Now()
	start <- struct{}{}
	<-done
	<-done
	ns := float64(time.Since(t0).Nanoseconds()) / float64(rounds)
	check(name, atomic.LoadUint64(&ops))
	result(name, ns, "ns/op")
}

// splitmix64, as in bench/time_bench.cpp.
func splitmix64(state *uint64) uint64 {
	*state += 0x9e3779b97f4a7c15
	z := *state
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9
	z = (z ^ (z >> 27)) * 0x94d049bb133111eb
	return z ^ (z >> 31)
}

func sleepersLateness() {
	const n = 100000
	delays := make([]time.Duration, n)
	late := make([]int64, n)
	seed := uint64(42)
	for i := range delays {
		delays[i] = time.Duration(1000+splitmix64(&seed)%9001) * time.Microsecond
	}
	var wg sync.WaitGroup
	wg.Add(n)
	t0 := time.Now()
	for i := 0; i < n; i++ {
		go func(i int) {
			d := delays[i]
			s := time.Now()
			time.Sleep(d)
			late[i] = int64(time.Since(s) - d)
			wg.Done()
		}(i)
	}
	wg.Wait()
	totalMs := float64(time.Since(t0).Nanoseconds()) / 1e6
	var onTime uint64
	for _, l := range late {
		if l >= 0 {
			onTime++
		}
	}
	sort.Slice(late, func(a, b int) bool { return late[a] < late[b] })
	pct := func(p int) float64 { return float64(late[n*p/100]) / 1e3 }
	note("%d sleepers in %.1f ms; lateness max %.0f us, p90 %.0f us",
		n, totalMs, float64(late[n-1])/1e3, pct(90))
	check("sleepers_lateness", onTime)
	result("sleep_late_p50_us", pct(50), "us")
	result("sleep_late_p99_us", pct(99), "us")
}

func timerCreateStop() {
	const n = 1000000
	var stopped uint64
	t0 := time.Now()
	for i := 0; i < n; i++ {
		t := time.NewTimer(time.Hour)
		if t.Stop() {
			stopped++
		}
	}
	ns := float64(time.Since(t0).Nanoseconds()) / n
	check("timer_create_stop", stopped)
	result("timer_create_stop", ns, "ns/op")
}

const computeChunk = 20000 // leafWork iterations

type paddedCounter struct {
	n uint64
	_ [56]byte
}

// computePhase runs procs compute goroutines (and procs*4 blockers if asked)
// for d; it returns compute chunks per second and the blocking calls made.
func computePhase(procs int, blockers bool, d time.Duration) (float64, uint64) {
	var stop int32
	nblock := 0
	if blockers {
		nblock = procs * 4
	}
	counts := make([]paddedCounter, procs)
	var calls, sink uint64
	var wg sync.WaitGroup
	wg.Add(procs + nblock)
	for b := 0; b < nblock; b++ {
		go func() {
			var c uint64
			for atomic.LoadInt32(&stop) == 0 {
				sysNanosleep(time.Millisecond)
				c++
			}
			atomic.AddUint64(&calls, c)
			wg.Done()
		}()
	}
	t0 := time.Now()
	for p := 0; p < procs; p++ {
		go func(p int) {
			x, k := uint64(p), uint64(0)
			for atomic.LoadInt32(&stop) == 0 {
				x = leafWork(computeChunk, x)
				k++
				atomic.StoreUint64(&counts[p].n, k)
			}
			atomic.AddUint64(&sink, x)
			wg.Done()
		}(p)
	}
	time.Sleep(d)
	var total uint64
	for p := range counts {
		total += atomic.LoadUint64(&counts[p].n)
	}
	secs := time.Since(t0).Seconds()
	atomic.StoreInt32(&stop, 1)
	wg.Wait()
	return float64(total) / secs, atomic.LoadUint64(&calls)
}

func syscallCompute() {
	procs := runtime.GOMAXPROCS(0)
	// Alone, with blockers, alone again: the baseline is the mean of the
	// two runs around the measured one, so a drift of the machine cancels.
	a, _ := computePhase(procs, false, 400*time.Millisecond)
	b, calls := computePhase(procs, true, 800*time.Millisecond)
	c, _ := computePhase(procs, false, 400*time.Millisecond)
	base := (a + c) / 2
	note("compute chunks/s: %.0f alone, %.0f with %d blockers, %.0f alone; %d blocking calls in 0.8 s (ideal %d)",
		a, b, procs*4, c, calls, procs*4*800)
	result("syscall_kept", b/base, "fraction")
}
