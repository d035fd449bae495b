module github.com/honeai/hone

go 1.26
