// Built in GOPATH mode (GO111MODULE=off) against Debian's packaged lib/pq
// and redigo (golang-github-lib-pq-dev, golang-github-gomodule-redigo-dev):
// see bench/clientlib/run.sh. This file only keeps the directory out of
// the gorobench module next door.
module goclientbench

go 1.19
