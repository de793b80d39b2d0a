module github.com/druto/druto

go 1.26
