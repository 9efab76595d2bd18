module goronet

go 1.19
