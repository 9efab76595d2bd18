// The chat workload of bench/net/run.sh: a broadcast chat server (the Go
// twin of bench/net/chat_server.cpp) and its load client.
//
// Protocol (lines end in "\n"): a client's first line is "join R"; once
// room R holds chatRoomSize members the server sends "ready" to each of
// them; every later line a member sends is delivered to every member of
// its room, the sender included.
//
// Server structure: a goroutine per connection reading lines, a writer
// goroutine per client draining its own buffered channel (what is queued
// is batched, with non-blocking receives, into one write) and one
// broadcaster goroutine that owns the rooms.
package main

import (
	"bufio"
	"fmt"
	"net"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

const (
	chatRoomSize = 20   // members per room
	chatOutCap   = 128  // lines queued per client before the broadcaster waits
	chatEvents   = 256  // the broadcaster's queue
	chatOutBuf   = 4096 // bytes per write
	chatLineMax  = 63   // longest line, "\n" included
)

type chatClient struct {
	conn net.Conn
	out  chan string
	room int
}

type chatEvent struct {
	kind int // chatJoin, chatMsg, chatLeave
	from *chatClient
	line string // chatJoin: the room number; chatMsg: the line
}

const (
	chatJoin = iota
	chatMsg
	chatLeave
)

// chatWriter drains c.out: it waits for one line, then takes whatever else
// is already queued (up to one buffer) and writes it all at once.
func chatWriter(c *chatClient) {
	defer c.conn.Close()
	buf := make([]byte, 0, chatOutBuf)
	for line := range c.out {
		buf = append(buf[:0], line...)
	batch:
		for len(buf)+chatLineMax <= chatOutBuf {
			select {
			case more, ok := <-c.out:
				if !ok {
					break batch
				}
				buf = append(buf, more...)
			default:
				break batch
			}
		}
		if _, err := c.conn.Write(buf); err != nil {
			// The peer is gone: drain the channel until the broadcaster
			// closes it, so that it never waits on this client.
			for range c.out {
			}
			return
		}
	}
}

// chatReader turns the connection's lines into events for the broadcaster.
func chatReader(c *chatClient, events chan<- chatEvent) {
	r := bufio.NewReaderSize(c.conn, 4096)
	joined := false
	for {
		b, err := r.ReadSlice('\n')
		if err != nil {
			break
		}
		if len(b) > chatLineMax {
			break
		}
		if !joined {
			events <- chatEvent{kind: chatJoin, from: c, line: string(b)}
			joined = true
			continue
		}
		events <- chatEvent{kind: chatMsg, from: c, line: string(b)}
	}
	if joined {
		events <- chatEvent{kind: chatLeave, from: c}
	} else {
		c.conn.Close()
	}
}

// chatBroadcaster owns the rooms: no other goroutine touches them.
func chatBroadcaster(events <-chan chatEvent) {
	rooms := map[int][]*chatClient{}
	for ev := range events {
		c := ev.from
		switch ev.kind {
		case chatJoin:
			n, err := strconv.Atoi(strings.TrimSpace(strings.TrimPrefix(ev.line, "join ")))
			if err != nil {
				n = -1
			}
			c.room = n
			rooms[n] = append(rooms[n], c)
			if len(rooms[n]) == chatRoomSize {
				for _, m := range rooms[n] {
					m.out <- "ready\n"
				}
			}
		case chatMsg:
			for _, m := range rooms[c.room] {
				m.out <- ev.line
			}
		case chatLeave:
			members := rooms[c.room]
			for i, m := range members {
				if m == c {
					members[i] = members[len(members)-1]
					members = members[:len(members)-1]
					break
				}
			}
			if len(members) == 0 {
				delete(rooms, c.room)
			} else {
				rooms[c.room] = members
			}
			close(c.out)
		}
	}
}

func chatServer(addr string) {
	chatServe(listen(addr))
}

// chatServe accepts clients forever: a writer and a reader goroutine each.
func chatServe(ln net.Listener) {
	events := make(chan chatEvent, chatEvents)
	go chatBroadcaster(events)
	acceptLoop(ln, func(conn net.Conn) {
		c := &chatClient{conn: conn, out: make(chan string, chatOutCap)}
		go chatWriter(c)
		chatReader(c, events)
	})
}

// chatClientRun opens nconn connections in rooms of chatRoomSize, waits
// until every room is ready, then has every connection send `lines` lines
// (one write each) while it counts what each connection receives: every
// member must get exactly `lines` lines from each member of its room.
// Reports the time from the first send to the last delivery.
//
// burst (needs pid): the server is stopped (SIGSTOP) while every line is
// sent and continued once all are in its sockets, so that what it batches
// depends on its runtime's scheduling order alone, not on the timing of
// the two processes; the time then counts from the SIGCONT.
func chatClientRun(pid int, addr string, nconn, lines int, limit float64, burst bool) {
	if nconn%chatRoomSize != 0 {
		die("chat-client: %d connections do not fill rooms of %d", nconn, chatRoomSize)
	}
	deadline := time.Now().Add(time.Duration(limit * float64(time.Second)))
	conns := dialAll(addr, nconn)
	readers := make([]*bufio.Reader, nconn)
	var ready sync.WaitGroup
	for i, c := range conns {
		c.SetDeadline(deadline)
		readers[i] = bufio.NewReaderSize(c, 64<<10)
		if _, err := fmt.Fprintf(c, "join %d\n", i/chatRoomSize); err != nil {
			die("chat-client: join: %v", err)
		}
	}
	for i := range conns {
		ready.Add(1)
		go func(i int) {
			defer ready.Done()
			l, err := readers[i].ReadString('\n')
			if err != nil || l != "ready\n" {
				die("chat-client: conn %d: waiting for ready: %q %v", i, l, err)
			}
		}(i)
	}
	ready.Wait()

	if burst {
		if pid <= 0 {
			die("chat-client: -burst needs -pid")
		}
		if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
			die("chat-client: stop the server: %v", err)
		}
	}
	cpu0 := cpuTicks(pid)
	start := time.Now()
	var delivered int64
	var wg, sent sync.WaitGroup
	for i, c := range conns {
		wg.Add(2)
		sent.Add(1)
		go func(i int, c net.Conn) {
			defer wg.Done()
			defer sent.Done()
			// Fixed-width lines: sender and sequence number, padded.
			line := make([]byte, 32)
			for q := 0; q < lines; q++ {
				s := fmt.Sprintf("%06d %04d", i, q)
				copy(line, s)
				for k := len(s); k < len(line)-1; k++ {
					line[k] = '.'
				}
				line[len(line)-1] = '\n'
				if _, err := c.Write(line); err != nil {
					die("chat-client: conn %d: write: %v", i, err)
				}
			}
		}(i, c)
		go func(i int) {
			defer wg.Done()
			room := i / chatRoomSize
			got := make([]int, chatRoomSize)
			for n := 0; n < chatRoomSize*lines; n++ {
				l, err := readers[i].ReadSlice('\n')
				if err != nil {
					die("chat-client: conn %d: %d of %d lines: %v", i, n, chatRoomSize*lines, err)
				}
				from, err := strconv.Atoi(string(l[:6]))
				if err != nil || from/chatRoomSize != room {
					die("chat-client: conn %d (room %d): stray line %q", i, room, l)
				}
				got[from%chatRoomSize]++
			}
			for k, g := range got {
				if g != lines {
					die("chat-client: conn %d got %d lines from member %d, want %d", i, g, k, lines)
				}
			}
			atomic.AddInt64(&delivered, int64(chatRoomSize*lines))
		}(i)
	}
	if burst {
		sent.Wait()
		start = time.Now()
		if err := syscall.Kill(pid, syscall.SIGCONT); err != nil {
			die("chat-client: continue the server: %v", err)
		}
	}
	wg.Wait()
	elapsed := time.Since(start)
	cpu1 := cpuTicks(pid)
	want := int64(nconn) * chatRoomSize * int64(lines)
	if delivered != want {
		die("chat-client: %d deliveries, want %d", delivered, want)
	}
	fmt.Printf("RESULT wall_ms %.1f ms\n", elapsed.Seconds()*1e3)
	fmt.Printf("RESULT deliveries %d count\n", delivered)
	fmt.Printf("RESULT rate %.0f deliveries/s\n", float64(delivered)/elapsed.Seconds())
	if pid > 0 {
		cpu := float64(cpu1-cpu0) / 100
		fmt.Printf("RESULT srv_cpu_ms %.0f ms\n", cpu*1e3)
		fmt.Printf("RESULT srv_cpu_pct %.1f %%\n", 100*cpu/elapsed.Seconds())
	}
	for _, c := range conns {
		c.Close()
	}
}

// chatSelf runs the server and the client in one process (the twin of
// goro_net_chat --self).
func chatSelf(nconn, lines int, limit float64) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		die("listen: %v", err)
	}
	go chatServe(ln)
	chatClientRun(0, ln.Addr().String(), nconn, lines, limit, false)
}
