// Twin of bench/preempt_bench.cpp: a 1 ms ticker next to call-free hogs at
// GOMAXPROCS 2, 1000 ticks or 4 s, whichever comes first; the p99 of the
// gaps between ticks minus the period, unit ms_p99. Go has no time-slice
// setting: the _1ms workloads run Go's default 10 ms slice.
package main

import (
	"fmt"
	"net"
	"runtime"
	"sort"
	"sync/atomic"
	"time"
)

func init() {
	register("ticker_late_2hogs", "1 ms ticker next to 2 call-free hogs at gomaxprocs 2, <= 1000 ticks in <= 4 s; p99 lateness ms", nil, func() { tickerLate("ticker_late_2hogs", 2) })
	register("ticker_late_4hogs", "1 ms ticker next to 4 call-free hogs at gomaxprocs 2, <= 1000 ticks in <= 4 s; p99 lateness ms", nil, func() { tickerLate("ticker_late_4hogs", 4) })
	register("ticker_late_2hogs_1ms", "ticker_late_2hogs with a 1 ms time slice in goro (Go: its default); p99 lateness ms", nil, func() { tickerLate("ticker_late_2hogs_1ms", 2) })
	register("sleep_beside_udp_writer", "10 ms sleeps at gomaxprocs 1 beside a goroutine looping UDP writes that never wait; median sleep ms", nil, sleepBesideUDPWriter)
	register("ticker_late_4hogs_1ms", "ticker_late_4hogs with a 1 ms time slice in goro (Go: its default); p99 lateness ms", nil, func() { tickerLate("ticker_late_4hogs_1ms", 4) })
}

//go:noinline
func hogLoop(stop *int32) uint64 {
	x := uint64(1)
	for atomic.LoadInt32(stop) == 0 {
		x = x*6364136223846793005 + 1442695040888963407
	}
	return x
}

func tickerLate(name string, hogs int) {
	prev := runtime.GOMAXPROCS(2)
	var stop int32
	done := make(chan struct{}, hogs)
	for i := 0; i < hogs; i++ {
		go func() { hogLoop(&stop); done <- struct{}{} }()
	}
	const maxTicks = 1000
	const maxTime = 4 * time.Second
	late := make([]float64, 0, maxTicks)
	t := time.NewTicker(time.Millisecond)
	last := time.Now()
	start := last
	for i := 0; i < maxTicks && last.Sub(start) < maxTime; i++ {
		<-t.C
		now := time.Now()
		late = append(late, float64(now.Sub(last).Nanoseconds())/1e6-1)
		last = now
	}
	t.Stop()
	atomic.StoreInt32(&stop, 1)
	for i := 0; i < hogs; i++ {
		<-done
	}
	runtime.GOMAXPROCS(prev)
	sort.Float64s(late)
	n := len(late)
	fmt.Printf("# p50 %.2f ms, max %.2f ms, %d ticks\n", late[n/2], late[n-1], n)
	result(name, late[n*99/100], "ms_p99")
}

// Twin of sleep_beside_udp_writer (issue 25 bug 7): at GOMAXPROCS 1, 50
// sleeps of 10 ms beside a goroutine whose UDP writes never wait.
func sleepBesideUDPWriter() {
	prev := runtime.GOMAXPROCS(1)
	sink, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		panic(err)
	}
	out, err := net.Dial("udp", sink.LocalAddr().String())
	if err != nil {
		panic(err)
	}
	var stop int32
	done := make(chan struct{}, 2)
	go func() {
		msg := make([]byte, 64)
		for atomic.LoadInt32(&stop) == 0 {
			out.Write(msg)
		}
		done <- struct{}{}
	}()
	go func() {
		buf := make([]byte, 64)
		for {
			if _, _, err := sink.ReadFrom(buf); err != nil {
				break
			}
		}
		done <- struct{}{}
	}()
	const sleeps = 50
	ms := make([]float64, 0, sleeps)
	for i := 0; i < sleeps; i++ {
		t0 := time.Now()
		time.Sleep(10 * time.Millisecond)
		ms = append(ms, float64(time.Since(t0).Nanoseconds())/1e6)
	}
	atomic.StoreInt32(&stop, 1)
	<-done
	sink.Close()
	<-done
	out.Close()
	runtime.GOMAXPROCS(prev)
	sort.Float64s(ms)
	note("p90 %.1f ms, max %.1f ms, %d sleeps", ms[sleeps*9/10], ms[sleeps-1], sleeps)
	result("sleep_beside_udp_writer", ms[sleeps/2], "ms_p50")
}
