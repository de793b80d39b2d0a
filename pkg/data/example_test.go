package data_test

import (
	"fmt"
	"strings"

	"github.com/druto/druto/pkg/data"
)

func ExampleEncode() {
	tokens, err := data.Encode([]byte("বই"))
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Printf("%d tokens: %x\n", len(tokens), tokens)
	fmt.Println(data.DecodeString(tokens[:5])) // a sample cut inside a character: U+FFFD

	_, err = data.Encode([]byte("caf\xe9"))
	fmt.Println(err)
	// Output:
	// 6 tokens: [e0 a6 ac e0 a6 87]
	// ব�
	// data: invalid UTF-8 at byte 3 (save the file as UTF-8)
}

func ExampleCorpus() {
	lines := strings.Split(string(data.Corpus(1, 8192)), "\n")
	for _, line := range lines[:8] {
		fmt.Println(line)
	}
	// Output:
	// The box is big.
	// বাক্সটি বড়।
	// The story is funny.
	// গল্পটি মজার।
	// There are 3 chairs in the class.
	// ক্লাসে ৩টি চেয়ার আছে।
	// Rahim has 3 bananas and Karim has 1, so they have 4 in all.
	// রহিমের ৩টি আর করিমের ১টি কলা আছে, মোট ৪টি।
}

func ExampleNewLoader() {
	tokens := []int32{0, 1, 2, 3, 4, 5, 6, 7, 8, 9}
	l, err := data.NewLoader(tokens, 2, 2) // batches of 2 sequences of 2 tokens
	if err != nil {
		fmt.Println(err)
		return
	}
	in, tg := make([]int32, 4), make([]int32, 4)
	for range l.Batches() + 1 {
		pos := l.Pos()
		if err := l.Next(in, tg); err != nil {
			fmt.Println(err)
			return
		}
		fmt.Println(pos, in, tg)
	}
	// Output:
	// 0 [0 1 2 3] [1 2 3 4]
	// 4 [4 5 6 7] [5 6 7 8]
	// 0 [0 1 2 3] [1 2 3 4]
}
