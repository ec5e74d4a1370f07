// Package textnorm turns text into the terms that agent discovery indexes and
// matches: a Unicode tokenizer with case folding, an English stemmer
// (Porter2), an English stop-word list, and the splitting of identifiers
// (camelCase, snake_case, kebab-case, digits, and concatenated lower-case
// words against a caller-supplied vocabulary).
//
// Every function is pure, allocation-conscious and safe for concurrent use;
// none panics on any input, including invalid UTF-8.
package textnorm
