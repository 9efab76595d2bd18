// Sync workloads; twins of bench/sync_bench.cpp.
package main

import (
	"sync"
	"time"
)

func init() {
	register("mutex_8", "8 goroutines incrementing a shared counter under a mutex, 1M increments; ns/increment", nil, mutex8)
}

func mutex8() {
	const goroutines = 8
	const total = 1000000
	const per = total / goroutines
	var mu sync.Mutex
	var counter uint64
	var wg sync.WaitGroup
	t0 := time.Now()
	wg.Add(goroutines)
	for i := 0; i < goroutines; i++ {
		go func() {
			for j := 0; j < per; j++ {
				mu.Lock()
				counter++
				mu.Unlock()
			}
			wg.Done()
		}()
	}
	wg.Wait()
	ns := float64(time.Since(t0).Nanoseconds()) / total
	check("mutex_8", counter)
	result("mutex_8", ns, "ns/increment")
}
