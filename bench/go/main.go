// Command gorobench holds the Go twins of goro's C++ benchmark workloads
// (bench/*.cpp). It runs one workload per process:
//
//	gorobench <workload>   # GOMAXPROCS from the environment, as usual
//	gorobench --list
//
// and prints the same lines as the C++ side:
//
//	RESULT <metric> <value> <unit>
//	CHECK  <workload> <value>
//
// Standard library only (the benchmark machine reaches no module proxy).
package main

import (
	"bufio"
	"fmt"
	"os"
	"runtime"
	"runtime/trace"
	"sort"
	"strings"
	"sync/atomic"
	"syscall"
	"time"
)

type workload struct {
	name, description string
	aliases           []string
	fn                func()
}

var workloads = map[string]*workload{}

// register adds a workload; call it from an init function.
func register(name, description string, aliases []string, fn func()) {
	workloads[name] = &workload{name, description, aliases, fn}
}

func result(metric string, value float64, unit string) {
	fmt.Printf("RESULT %s %.6g %s\n", metric, value, unit)
}

func check(name string, value uint64) {
	fmt.Printf("CHECK %s %d\n", name, value)
}

func note(format string, args ...interface{}) {
	fmt.Printf("# "+format+"\n", args...)
}

// leafWork is the opaque leaf CPU work, identical to gorobench::leaf_work in
// bench/bench_main.cpp: one LCG step per iteration, never inlined.
//
//go:noinline
func leafWork(iters, seed uint64) uint64 {
	x := seed
	for i := uint64(0); i < iters; i++ {
		x = x*6364136223846793005 + 1442695040888963407
	}
	return x
}

// rssBytes reads the resident set size from /proc/self/statm.
func rssBytes() uint64 {
	f, err := os.Open("/proc/self/statm")
	if err != nil {
		return 0
	}
	defer f.Close()
	var size, resident uint64
	if _, err := fmt.Fscan(bufio.NewReader(f), &size, &resident); err != nil {
		return 0
	}
	return resident * uint64(os.Getpagesize())
}

// statusKiB reads the VmHWM and VmPTE fields of /proc/self/status (KiB).
func statusKiB() (hwm, pte float64) {
	data, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0, 0
	}
	for _, line := range strings.Split(string(data), "\n") {
		var v float64
		if n, _ := fmt.Sscanf(line, "VmHWM: %f kB", &v); n == 1 {
			hwm = v
		}
		if n, _ := fmt.Sscanf(line, "VmPTE: %f kB", &v); n == 1 {
			pte = v
		}
	}
	return hwm, pte
}

// pageTableBytes is the size of this process's page tables now (VmPTE; not
// part of RSS), as gorobench::page_table_bytes.
func pageTableBytes() uint64 {
	_, pte := statusKiB()
	return uint64(pte) * 1024
}

// spinFor busy-waits, like doWork in Go's proc_test.go.
func spinFor(d time.Duration) {
	start := time.Now()
	for time.Since(start) < d {
	}
}

// warmupScheduler gets every P running, as in Go's proc_test.go.
func warmupScheduler(n int) {
	done := make(chan struct{})
	var count int32
	for i := 0; i < n; i++ {
		go func() {
			atomic.AddInt32(&count, 1)
			for atomic.LoadInt32(&count) < int32(n) {
			}
			spinFor(time.Millisecond)
			done <- struct{}{}
		}()
	}
	for i := 0; i < n; i++ {
		<-done
	}
}

func usage() {
	fmt.Fprintf(os.Stderr, "usage: %s <workload> | --list | --help\nworkloads:\n", os.Args[0])
	for _, name := range names() {
		fmt.Fprintf(os.Stderr, "  %-16s %s\n", name, workloads[name].description)
	}
	fmt.Fprintln(os.Stderr, "GOMAXPROCS from the environment sets the number of Ps.")
}

func names() []string {
	var n []string
	for name := range workloads {
		n = append(n, name)
	}
	sort.Strings(n)
	return n
}

func find(arg string) *workload {
	if w, ok := workloads[arg]; ok {
		return w
	}
	for _, w := range workloads {
		for _, a := range w.aliases {
			if a == arg {
				return w
			}
		}
	}
	return nil
}

func main() {
	if len(os.Args) != 2 {
		usage()
		os.Exit(2)
	}
	arg := os.Args[1]
	switch arg {
	case "--list":
		fmt.Println(strings.Join(names(), "\n"))
		return
	case "--help", "-h":
		usage()
		return
	}
	w := find(arg)
	if w == nil {
		fmt.Fprintf(os.Stderr, "unknown workload: %s\n", arg)
		usage()
		os.Exit(2)
	}
	fmt.Printf("# runtime=go workload=%s gomaxprocs=%d num_cpu=%d version=%s\n",
		w.name, runtime.GOMAXPROCS(0), runtime.NumCPU(), runtime.Version())
	// GORO_TRACE=<file>, the variable that switches goro's execution trace
	// on, switches Go's runtime/trace on here, so bench/run.sh --trace
	// compares the two tracers' overhead on the same workloads.
	if path := os.Getenv("GORO_TRACE"); path != "" {
		f, err := os.Create(path)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(2)
		}
		if err := trace.Start(f); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(2)
		}
		defer func() { trace.Stop(); f.Close() }()
	}
	w.fn()
	reportMemory(w.name)
}

// reportMemory prints the same three lines as gorobench::report_memory:
// peak RSS (VmHWM), page tables (VmPTE) at the end, minor page faults;
// bench_report shows them as memory columns beside the workload's times.
func reportMemory(name string) {
	hwm, pte := statusKiB()
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	// Whole numbers, printed exactly (result's %.6g would round them).
	fmt.Printf("RESULT %s.peak_rss %d KiB\n", name, uint64(hwm))
	fmt.Printf("RESULT %s.page_tables %d KiB\n", name, uint64(pte))
	fmt.Printf("RESULT %s.minflt %d faults\n", name, ru.Minflt)
}
