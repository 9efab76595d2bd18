module gonetbench

go 1.19
