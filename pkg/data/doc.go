// Package data is druto's text pipeline: a byte-level UTF-8 tokenizer, the
// built-in bilingual (Bangla and English) corpus generator, a reader for
// llm.c token shards, and deterministic batching.
package data
