// Twin of bench/oslock_bench.cpp: an uncontended mutex pair.
package main

import (
	"sync"
	"time"
)

func init() {
	register("stdmutex_pair", "an uncontended std::mutex lock/unlock pair in a goroutine (Go: sync.Mutex), 20M pairs; ns/pair", nil, stdmutexPair)
}

func stdmutexPair() {
	const pairs = 20000000
	var mu sync.Mutex
	done := make(chan struct{})
	var ns float64
	go func() {
		t0 := time.Now()
		for i := 0; i < pairs; i++ {
			mu.Lock()
			mu.Unlock()
		}
		ns = float64(time.Since(t0).Nanoseconds()) / pairs
		close(done)
	}()
	<-done
	check("stdmutex_pair", pairs)
	result("stdmutex_pair", ns, "ns/pair")
}
