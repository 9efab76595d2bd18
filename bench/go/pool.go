// Twin of bench/pool_bench.cpp: sync.Pool get/put pairs.
package main

import (
	"sync"
	"time"
)

func init() {
	register("pool_getput", "8 goroutines each getting an object from a pool, touching it and putting it back, 10M get/put pairs; ns/pair", nil, poolGetPut)
}

type poolObj struct {
	a [8]uint64
}

func poolGetPut() {
	const goroutines = 8
	const total = 10000000
	const per = total / goroutines
	p := sync.Pool{New: func() interface{} { return new(poolObj) }}
	var wg sync.WaitGroup
	t0 := time.Now()
	wg.Add(goroutines)
	for i := 0; i < goroutines; i++ {
		go func() {
			for j := 0; j < per; j++ {
				o := p.Get().(*poolObj)
				o.a[0]++
				p.Put(o)
			}
			wg.Done()
		}()
	}
	wg.Wait()
	ns := float64(time.Since(t0).Nanoseconds()) / total
	check("pool_getput", total)
	result("pool_getput", ns, "ns/pair")
}
