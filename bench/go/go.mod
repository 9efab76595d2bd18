module gorobench

go 1.19
