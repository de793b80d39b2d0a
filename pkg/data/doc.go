// Package data is druto's text pipeline: a byte-level UTF-8 tokenizer, the
// built-in bilingual (Bangla and English) corpus generator, a reader and
// writer for llm.c token shards, and deterministic llm.c-style batching.
//
// # Tokens
//
// By default a token is one byte of UTF-8 (VocabSize 256), so any language
// works without a vocabulary file; a Bangla letter takes three tokens.
// Encode rejects text that is not valid UTF-8 and names the first bad byte;
// DecodeString turns a sample that stops inside a character into valid
// UTF-8 for display.
//
// A Tokenizer generalises this: Bytes, GPT2 (GPT-2's r50k_base BPE,
// embedded by github.com/tiktoken-go/tokenizer, no download) and BPE, a
// byte-level byte-pair encoding that TrainBPE learns on a corpus in the
// style of Karpathy's minbpe. The BPE is written here from scratch as a lab
// exercise, and it is the cure for Bangla's three tokens a letter: on the
// built-in corpus a vocabulary of 1024 takes 0.37 tokens a Bangla
// character (bytes 2.59, GPT-2 1.97). LoadTokens tokenises a text file once
// and caches the tokens as an llm.c shard.
//
// # The built-in corpus
//
// Corpus generates text with structure a tiny model can learn quickly: pairs
// of lines, an English sentence and its Bangla translation, built from ten
// templates (possession, actions with a time adverb, going somewhere, "there
// are", descriptions, likes, arithmetic, two-person story sums, counting,
// weekdays) over a fixed vocabulary of 16 names, 30 nouns, 11 verbs and 21
// adjectives:
//
//	Rina bought 4 mangoes yesterday.
//	রিনা গতকাল ৪টি আম কিনল।
//	There is one bird in the tree.
//	গাছে একটি পাখি আছে।
//	7 minus 2 is 5.
//	৭ থেকে ২ বাদ দিলে ৫ থাকে।
//
// English lines use ASCII digits, Bangla lines Bangla digits (০-৯), and
// about one fact in five writes its numbers as words. Agreement holds
// throughout (1 book / 3 books, has / have, there is / there are; টি for
// things and জন for people; Bangla verb endings by person and by the tense
// the time adverb asks for), every sum is right, and a Bangla line repeats
// the names and numbers of the English line before it. About 70% of the
// bytes are Bangla. The text depends only on the seed: the generator uses
// its own splitmix64, not math/rand.
//
// Learnability, checked on 2026-12-02 with a PyTorch GPT-2-style byte model
// (C 128, 4 layers, 4 heads, T 128; AdamW, lr 2e-3 with 20 warm-up steps and
// cosine decay) on Corpus(1, 1 MiB) split 90/10: after 300 steps of batch 8
// the validation loss was 1.30-1.37 nats a byte (1.46-1.54 at lr 1e-3 and
// 6e-4), about 1.9 on English bytes and 1.1 on Bangla bytes.
//
// # Files and batches
//
// Load reads a training file: an llm.c token shard (.bin: a 256-int32
// header with magic 20240520 and version 1, then uint16 tokens) or UTF-8
// text. Split cuts tokens into training and validation parts, and a Loader
// yields batches of B sequences of T tokens with targets shifted by one, in
// order, wrapping around; its position is what a checkpoint saves.
package data
