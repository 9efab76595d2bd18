// chat_client.hpp: the load client of the chat workload, in goro (the twin
// of chatClientRun in bench/go/net/chat.go), for goro_net_chat --self.
#pragma once

#include <cstddef>
#include <string>

// Opens conns connections to addr in rooms of room_size, waits until every
// room is ready, then has every connection send `lines` lines (one write
// each) while it counts what each receives: every member must get exactly
// `lines` lines from each member of its room. Prints RESULT lines (the
// time from the first send to the last delivery) and returns 0, or prints
// why on stderr and returns 1. Bounded by limit seconds (deadlines on
// every connection). Runs on a goroutine.
int chat_client(const std::string& addr, int conns, int lines, double limit,
                std::size_t room_size);
