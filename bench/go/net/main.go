// gonetbench: the Go side of bench/net/run.sh (standard library only):
// the Go twins of goro's network servers and the load clients used for
// both runtimes.
//
// Servers (print "listening ADDR" once ready):
//
//	gonetbench echo-server ADDR   a goroutine per connection, 4 KiB buffer
//	gonetbench http-server ADDR   net/http: /heavy runs heavyWork, any
//	                              other path answers "Hello, World!"
//	gonetbench raw-server ADDR    the same routes on a minimal HTTP/1.1
//	                              parser over raw TCP (keep-alive,
//	                              pipelining), goro_net_http's twin
//	gonetbench chat-server ADDR   broadcast chat in rooms of 20 (chat.go)
//
// Clients (print "RESULT name value unit" lines, with their own CPU share
// over the measured window; -pid PID adds the server's, read from
// /proc/PID/stat):
//
//	gonetbench echo-client [-pid PID] [-warmup S] ADDR CONNS SECONDS [SIZE]
//	    CONNS connections, each doing SIZE-byte (512) write + read-full
//	    round trips; round trips/s and latency percentiles of every round
//	    trip after the warm-up
//	gonetbench http-client [-pid PID] [-warmup S] ADDR CONNS SECONDS HEAVY_EVERY
//	    keep-alive GETs, one in HEAVY_EVERY of them /heavy (0: none);
//	    requests/s and light and heavy latency percentiles apart
//	gonetbench idle-client ADDR CONNS HOLD_SECONDS
//	    CONNS keep-alive connections, one GET / each, then idle; prints
//	    "ready CONNS" once all are open, closes them after HOLD_SECONDS or
//	    when stdin ends
//	gonetbench chat-client [-pid PID] [-burst] ADDR CONNS LINES SECONDS
//	    CONNS connections in rooms of 20, each sending LINES lines once
//	    every room is ready; verifies that every member receives every
//	    line of its room; the time from the first send to the last
//	    delivery (bounded by SECONDS) and the server's CPU; -burst stops
//	    the server while the lines are sent (see chatClientRun)
//	gonetbench chat-self [CONNS [LINES [SECONDS]]]
//	    chat-server and chat-client in one process (2000, 20, 60)
//	gonetbench heavy-time
//	    prints "heavy_us X", the median time of one heavyWork call
package main

import (
	"bufio"
	"bytes"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// heavyRounds and heavyWork are bench/net/heavy.hpp's kHeavyRounds and
// heavy_work: the same splitmix64 chain, about 1 ms.
const heavyRounds = 285000

func heavyWork(seed uint64) uint64 {
	x := seed
	for i := 0; i < heavyRounds; i++ {
		x += 0x9e3779b97f4a7c15
		z := x
		z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9
		z = (z ^ (z >> 27)) * 0x94d049bb133111eb
		x = z ^ (z >> 31)
	}
	return x
}

func die(format string, args ...interface{}) {
	fmt.Fprintf(os.Stderr, "gonetbench: "+format+"\n", args...)
	os.Exit(1)
}

func listen(addr string) net.Listener {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		die("listen %s: %v", addr, err)
	}
	fmt.Printf("listening %s\n", ln.Addr())
	return ln
}

// acceptLoop serves every connection in its own goroutine; temporary
// errors (EMFILE) back off as net/http's Server does.
func acceptLoop(ln net.Listener, serve func(net.Conn)) {
	for {
		c, err := ln.Accept()
		if err != nil {
			fmt.Fprintln(os.Stderr, "gonetbench: accept:", err)
			time.Sleep(5 * time.Millisecond)
			continue
		}
		go serve(c)
	}
}

// ---- servers -------------------------------------------------------------

func echoServer(addr string) {
	acceptLoop(listen(addr), func(c net.Conn) {
		defer c.Close()
		buf := make([]byte, 4096)
		for {
			n, err := c.Read(buf)
			if n > 0 {
				if _, werr := c.Write(buf[:n]); werr != nil {
					return
				}
			}
			if err != nil {
				return
			}
		}
	})
}

func httpServer(addr string) {
	ln := listen(addr)
	mux := http.NewServeMux()
	var served uint64 // a seed only: the work does not depend on it
	mux.HandleFunc("/heavy", func(w http.ResponseWriter, r *http.Request) {
		seed := atomic.AddUint64(&served, 1)
		io.WriteString(w, strconv.FormatUint(heavyWork(seed), 10))
	})
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "Hello, World!")
	})
	srv := &http.Server{Handler: mux}
	die("http: %v", srv.Serve(ln))
}

const (
	maxHead = 8192 // longest request head (431 beyond)
	outSize = 4096 // responses batched per write
)

// dateLine is "Date: ...\r\n", rebuilt when the second changes.
type dateLine struct {
	sec  int64
	text []byte
}

func (d *dateLine) get() []byte {
	now := time.Now()
	if s := now.Unix(); s != d.sec || d.text == nil {
		d.sec = s
		d.text = append(d.text[:0], "Date: "...)
		d.text = now.UTC().AppendFormat(d.text, http.TimeFormat)
		d.text = append(d.text, "\r\n"...)
	}
	return d.text
}

type request struct {
	method, target  []byte
	bad, keepAlive  bool
	hasBody, http10 bool
}

func hasToken(value []byte, token string) bool {
	for _, item := range bytes.Split(value, []byte(",")) {
		if strings.EqualFold(string(bytes.Trim(item, " \t")), token) {
			return true
		}
	}
	return false
}

// parse is http_server.cpp's parse: head holds the request line and
// header lines, each ending in CRLF, without the empty line.
func parse(head []byte) request {
	r := request{keepAlive: true}
	eol := bytes.Index(head, []byte("\r\n"))
	line := head[:eol]
	sp1 := bytes.IndexByte(line, ' ')
	sp2 := bytes.LastIndexByte(line, ' ')
	if sp1 <= 0 || sp1 == sp2 {
		r.bad = true
		return r
	}
	r.method = line[:sp1]
	r.target = line[sp1+1 : sp2]
	switch version := string(line[sp2+1:]); {
	case version == "HTTP/1.0":
		r.http10 = true
		r.keepAlive = false
	case version != "HTTP/1.1" || len(r.target) == 0:
		r.bad = true
		return r
	}
	head = head[eol+2:]
	for len(head) > 0 {
		eol = bytes.Index(head, []byte("\r\n"))
		line = head[:eol]
		head = head[eol+2:]
		colon := bytes.IndexByte(line, ':')
		if colon <= 0 {
			r.bad = true
			return r
		}
		name := line[:colon]
		value := bytes.TrimLeft(line[colon+1:], " \t")
		switch {
		case bytes.EqualFold(name, []byte("connection")):
			if hasToken(value, "close") {
				r.keepAlive = false
			}
			if r.http10 && hasToken(value, "keep-alive") {
				r.keepAlive = true
			}
		case bytes.EqualFold(name, []byte("content-length")):
			if len(bytes.Trim(value, "0 \t")) > 0 {
				r.hasBody = true
			}
		case bytes.EqualFold(name, []byte("transfer-encoding")):
			r.hasBody = true
		}
	}
	return r
}

func respond(out []byte, date *dateLine, status, body string, keepAlive, http10, headOnly bool) []byte {
	out = append(out, "HTTP/1.1 "...)
	out = append(out, status...)
	out = append(out, "\r\n"...)
	out = append(out, date.get()...)
	out = append(out, "Content-Length: "...)
	out = strconv.AppendInt(out, int64(len(body)), 10)
	out = append(out, "\r\nContent-Type: text/plain; charset=utf-8\r\n"...)
	if !keepAlive {
		out = append(out, "Connection: close\r\n"...)
	} else if http10 {
		out = append(out, "Connection: keep-alive\r\n"...)
	}
	out = append(out, "\r\n"...)
	if !headOnly {
		out = append(out, body...)
	}
	return out
}

const maxResponse = 256

func rawServe(c net.Conn) {
	defer c.Close()
	in := make([]byte, maxHead)
	out := make([]byte, 0, outSize)
	var date dateLine
	var served uint64
	have, scanned := 0, 0
	flush := func() bool {
		if len(out) > 0 {
			if _, err := c.Write(out); err != nil {
				return false
			}
		}
		out = out[:0]
		return true
	}
	for {
		n, err := c.Read(in[have:])
		if n == 0 || err != nil {
			return
		}
		have += n
		start := 0
		close := false
		for !close {
			from := start
			if scanned-3 > from {
				from = scanned - 3
			}
			i := bytes.Index(in[from:have], []byte("\r\n\r\n"))
			if i < 0 {
				scanned = have
				break
			}
			end := from + i + 4
			r := parse(in[start : end-2])
			start, scanned = end, end
			if outSize-len(out) < maxResponse && !flush() {
				return
			}
			if r.bad {
				out = respond(out, &date, "400 Bad Request", "", false, false, false)
				close = true
				break
			}
			if r.hasBody {
				out = respond(out, &date, "501 Not Implemented", "", false, false, false)
				close = true
				break
			}
			headOnly := string(r.method) == "HEAD"
			path := r.target
			if q := bytes.IndexByte(path, '?'); q >= 0 {
				path = path[:q]
			}
			switch {
			case !headOnly && string(r.method) != "GET":
				out = respond(out, &date, "405 Method Not Allowed", "", r.keepAlive, r.http10, false)
			case string(path) == "/heavy":
				if !flush() {
					return
				}
				body := strconv.FormatUint(heavyWork(served), 10)
				out = respond(out, &date, "200 OK", body, r.keepAlive, r.http10, headOnly)
			default:
				out = respond(out, &date, "200 OK", "Hello, World!", r.keepAlive, r.http10, headOnly)
			}
			served++
			close = !r.keepAlive
		}
		if !close && start == 0 && have == maxHead {
			out = respond(out, &date, "431 Request Header Fields Too Large", "", false, false, false)
			close = true
		}
		if !flush() || close {
			return
		}
		if start > 0 {
			copy(in, in[start:have])
			have -= start
			scanned -= start
		}
	}
}

func rawServer(addr string) {
	acceptLoop(listen(addr), rawServe)
}

// ---- clients -------------------------------------------------------------

// cpuTicks is utime + stime of a process, in clock ticks (1/100 s).
func cpuTicks(pid int) int64 {
	if pid <= 0 {
		return 0
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	// Fields after the ")" that ends the command name: state is field 3,
	// utime and stime are fields 14 and 15.
	f := strings.Fields(string(b[bytes.LastIndexByte(b, ')')+1:]))
	if len(f) < 13 {
		return 0
	}
	u, _ := strconv.ParseInt(f[11], 10, 64)
	s, _ := strconv.ParseInt(f[12], 10, 64)
	return u + s
}

// window is the measured interval [start, stop) after the warm-up, and
// the server's CPU ticks at both ends.
type window struct {
	pid         int
	start, stop time.Time
	cpu0, cpu1  int64         // the server's, in ticks
	own0, own1  time.Duration // this client's
	wg          sync.WaitGroup
}

// ownCPU is the CPU time this process has used (user + system).
func ownCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func newWindow(pid int, warmup, seconds float64) *window {
	w := &window{pid: pid}
	now := time.Now()
	w.start = now.Add(time.Duration(warmup * float64(time.Second)))
	w.stop = w.start.Add(time.Duration(seconds * float64(time.Second)))
	w.wg.Add(1)
	go func() {
		defer w.wg.Done()
		time.Sleep(time.Until(w.start))
		w.cpu0, w.own0 = cpuTicks(pid), ownCPU()
		time.Sleep(time.Until(w.stop))
		w.cpu1, w.own1 = cpuTicks(pid), ownCPU()
	}()
	return w
}

// report prints the server's CPU share of the window and what it cost per
// operation (us of server CPU per request or round trip).
func (w *window) report(ops int) {
	w.wg.Wait()
	secs := w.stop.Sub(w.start).Seconds()
	fmt.Printf("RESULT cli_cpu_pct %.1f %%\n", 100*(w.own1-w.own0).Seconds()/secs)
	if w.pid <= 0 {
		return
	}
	cpu := float64(w.cpu1-w.cpu0) / 100
	fmt.Printf("RESULT srv_cpu_pct %.1f %%\n", 100*cpu/secs)
	if ops > 0 {
		fmt.Printf("RESULT srv_cpu_us_per_op %.2f us\n", cpu*1e6/float64(ops))
	}
}

func percentile(sorted []float64, q float64) float64 {
	if len(sorted) == 0 {
		return 0
	}
	i := int(q * float64(len(sorted)))
	if i >= len(sorted) {
		i = len(sorted) - 1
	}
	return sorted[i]
}

func reportLatency(prefix string, lat []float64) {
	sort.Float64s(lat)
	for _, p := range []struct {
		name string
		q    float64
	}{{"p50", 0.50}, {"p90", 0.90}, {"p99", 0.99}, {"p999", 0.999}} {
		fmt.Printf("RESULT %s%s_us %.1f us\n", prefix, p.name, percentile(lat, p.q))
	}
	if len(lat) > 0 {
		fmt.Printf("RESULT %smax_us %.1f us\n", prefix, lat[len(lat)-1])
	}
}

// dialAll opens n connections (several at a time, so that 1000 dials do
// not take a second) and returns them or dies.
func dialAll(addr string, n int) []net.Conn {
	conns := make([]net.Conn, n)
	var wg sync.WaitGroup
	sem := make(chan struct{}, 64)
	for i := range conns {
		wg.Add(1)
		sem <- struct{}{}
		go func(i int) {
			defer wg.Done()
			defer func() { <-sem }()
			c, err := net.Dial("tcp", addr)
			if err != nil {
				die("dial %s: %v", addr, err)
			}
			conns[i] = c
		}(i)
	}
	wg.Wait()
	return conns
}

func echoClient(pid int, warmup float64, addr string, nconn int, seconds float64, size int) {
	conns := dialAll(addr, nconn)
	w := newWindow(pid, warmup, seconds)
	lats := make([][]float64, nconn)
	var wg sync.WaitGroup
	for i, c := range conns {
		wg.Add(1)
		go func(i int, c net.Conn) {
			defer wg.Done()
			defer c.Close()
			out := make([]byte, size)
			in := make([]byte, size)
			for k := range out {
				out[k] = byte(i*7 + k)
			}
			lat := make([]float64, 0, 4096)
			for {
				t0 := time.Now()
				if !t0.Before(w.stop) {
					break
				}
				if _, err := c.Write(out); err != nil {
					die("echo write: %v", err)
				}
				if _, err := io.ReadFull(c, in); err != nil {
					die("echo read: %v", err)
				}
				t1 := time.Now()
				if !bytes.Equal(in, out) {
					die("echo: wrong bytes back")
				}
				if !t0.Before(w.start) && t1.Before(w.stop) {
					lat = append(lat, float64(t1.Sub(t0).Nanoseconds())/1e3)
				}
			}
			lats[i] = lat
		}(i, c)
	}
	wg.Wait()
	var all []float64
	for _, l := range lats {
		all = append(all, l...)
	}
	secs := w.stop.Sub(w.start).Seconds()
	fmt.Printf("RESULT rate %.0f rt/s\n", float64(len(all))/secs)
	reportLatency("", all)
	w.report(len(all))
}

// readResponse reads one response (status line, headers, Content-Length
// bytes of body) and returns its status.
func readResponse(r *bufio.Reader) (int, error) {
	status, length := 0, -1
	for {
		line, err := r.ReadSlice('\n')
		if err != nil {
			return 0, err
		}
		if status == 0 {
			if len(line) < 12 || !bytes.HasPrefix(line, []byte("HTTP/1.1 ")) {
				return 0, fmt.Errorf("bad status line %q", line)
			}
			status, _ = strconv.Atoi(string(line[9:12]))
			continue
		}
		if len(line) <= 2 {
			break
		}
		if colon := bytes.IndexByte(line, ':'); colon > 0 &&
			bytes.EqualFold(line[:colon], []byte("content-length")) {
			length, _ = strconv.Atoi(string(bytes.TrimSpace(line[colon+1:])))
		}
	}
	if length < 0 {
		return 0, errors.New("response without Content-Length")
	}
	if _, err := r.Discard(length); err != nil {
		return 0, err
	}
	return status, nil
}

func httpClient(pid int, warmup float64, addr string, nconn int, seconds float64, heavyEvery int) {
	conns := dialAll(addr, nconn)
	w := newWindow(pid, warmup, seconds)
	light := make([][]float64, nconn)
	heavy := make([][]float64, nconn)
	var wg sync.WaitGroup
	lightReq := []byte("GET / HTTP/1.1\r\nHost: bench\r\n\r\n")
	heavyReq := []byte("GET /heavy HTTP/1.1\r\nHost: bench\r\n\r\n")
	for i, c := range conns {
		wg.Add(1)
		go func(i int, c net.Conn) {
			defer wg.Done()
			defer c.Close()
			r := bufio.NewReader(c)
			var l, h []float64
			// Every heavyEvery-th request is heavy, at a different phase
			// on each connection.
			for k := i; ; k++ {
				isHeavy := heavyEvery > 0 && k%heavyEvery == 0
				req := lightReq
				if isHeavy {
					req = heavyReq
				}
				t0 := time.Now()
				if !t0.Before(w.stop) {
					break
				}
				if _, err := c.Write(req); err != nil {
					die("http write: %v", err)
				}
				if st, err := readResponse(r); err != nil || st != 200 {
					die("http response: status %d, %v", st, err)
				}
				t1 := time.Now()
				if t0.Before(w.start) || !t1.Before(w.stop) {
					continue
				}
				us := float64(t1.Sub(t0).Nanoseconds()) / 1e3
				if isHeavy {
					h = append(h, us)
				} else {
					l = append(l, us)
				}
			}
			light[i], heavy[i] = l, h
		}(i, c)
	}
	wg.Wait()
	var ls, hs []float64
	for i := range light {
		ls = append(ls, light[i]...)
		hs = append(hs, heavy[i]...)
	}
	secs := w.stop.Sub(w.start).Seconds()
	fmt.Printf("RESULT rate %.0f req/s\n", float64(len(ls)+len(hs))/secs)
	fmt.Printf("RESULT light_rate %.0f req/s\n", float64(len(ls))/secs)
	fmt.Printf("RESULT heavy_rate %.0f req/s\n", float64(len(hs))/secs)
	reportLatency("light_", ls)
	reportLatency("heavy_", hs)
	w.report(len(ls) + len(hs))
}

func idleClient(addr string, nconn int, hold float64) {
	conns := make([]net.Conn, 0, nconn)
	req := []byte("GET / HTTP/1.1\r\nHost: bench\r\n\r\n")
	for i := 0; i < nconn; i++ {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			die("dial %s (connection %d): %v", addr, i, err)
		}
		if _, err := c.Write(req); err != nil {
			die("write: %v", err)
		}
		if st, err := readResponse(bufio.NewReaderSize(c, 256)); err != nil || st != 200 {
			die("response: status %d, %v", st, err)
		}
		conns = append(conns, c)
	}
	fmt.Printf("ready %d\n", len(conns))
	done := make(chan struct{})
	go func() {
		io.Copy(io.Discard, os.Stdin)
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(time.Duration(hold * float64(time.Second))):
	}
	for _, c := range conns {
		c.Close()
	}
}

func heavyTime() {
	us := make([]float64, 0, 101)
	var sink uint64
	for i := 0; i < 101; i++ {
		t0 := time.Now()
		sink += heavyWork(uint64(i))
		us = append(us, float64(time.Since(t0).Nanoseconds())/1e3)
	}
	sort.Float64s(us)
	fmt.Printf("heavy_us %.1f (checksum %d)\n", us[len(us)/2], sink%1000)
}

// ---- main ----------------------------------------------------------------

func main() {
	if len(os.Args) < 2 {
		die("usage: see the comment at the top of bench/go/net/main.go")
	}
	mode := os.Args[1]
	fs := flag.NewFlagSet(mode, flag.ExitOnError)
	pid := fs.Int("pid", 0, "server process whose CPU use to report")
	warmup := fs.Float64("warmup", 0.5, "seconds before measuring")
	burst := fs.Bool("burst", false, "chat-client: stop the server while sending")
	fs.Parse(os.Args[2:])
	a := fs.Args()
	atoi := func(i int, def int) int {
		if i >= len(a) {
			if def >= 0 {
				return def
			}
			die("%s: missing argument %d", mode, i+1)
		}
		n, err := strconv.Atoi(a[i])
		if err != nil {
			die("%s: %v", mode, err)
		}
		return n
	}
	atof := func(i int) float64 {
		if i >= len(a) {
			die("%s: missing argument %d", mode, i+1)
		}
		f, err := strconv.ParseFloat(a[i], 64)
		if err != nil {
			die("%s: %v", mode, err)
		}
		return f
	}
	addr := func() string {
		if len(a) == 0 {
			return "127.0.0.1:0"
		}
		return a[0]
	}
	switch mode {
	case "echo-server":
		echoServer(addr())
	case "http-server":
		httpServer(addr())
	case "raw-server":
		rawServer(addr())
	case "echo-client":
		echoClient(*pid, *warmup, addr(), atoi(1, -1), atof(2), atoi(3, 512))
	case "http-client":
		httpClient(*pid, *warmup, addr(), atoi(1, -1), atof(2), atoi(3, -1))
	case "idle-client":
		idleClient(addr(), atoi(1, -1), atof(2))
	case "chat-server":
		chatServer(addr())
	case "chat-client":
		chatClientRun(*pid, addr(), atoi(1, -1), atoi(2, 20), atof(3), *burst)
	case "chat-self":
		chatSelf(atoi(0, 2000), atoi(1, 20), float64(atoi(2, 60)))
	case "heavy-time":
		heavyTime()
	default:
		die("unknown mode %q", mode)
	}
}
