// Package discovery ranks registered agents for a free-text query
// (docs/API.md#discovery): a tokenizer and English stemmer, an in-memory inverted index
// kept current from registry events, two scorers (bm25, the default, and the
// seed's overlap), filters, and the seed's resource-URI matching.
//
// The main type is [Engine]. It works on its own, fed agents directly, so a
// host can embed it in a test in three lines:
//
//	e := discovery.New(nil)
//	e.Put(registry.Agent{Name: "finance-agent", Description: "Budget reports and cost analysis", Capabilities: []string{"budgeting", "cost-center"}})
//	results, err := e.Search("Get the budget and cost center for Engineering", nil)
//
// In a server it mirrors the registry with [Engine.Follow], which indexes a
// snapshot and then every change event, in a goroutine of its own so that
// the registry's writers do not wait for the index; a search first indexes
// the changes still queued, so a write the registry acknowledged is found
// by every search after it. Queries are
// shaped by a [Query] (limit, minimum score, scorer, labels, protocol,
// required resources, unavailable agents) and return [Result] values.
//
// # Text processing
//
// Text is cut into tokens (maximal runs of letters and digits, case-folded:
// "cost_center" gives "cost" and "center"), and every token is reduced to
// its Porter2 stem on both the index and the query side ("budgets" and
// "budgeting" both give "budget"). Matching is by whole stem, never by
// substring: "cost" does not match "costume". Query tokens are
// de-duplicated and stop words (the SMART list: "the", "please", "want",
// "help", ...) are dropped, unless the query has nothing else, in which
// case they are searched as ordinary words (so "IT" or "who" still find an
// agent named so). A query with no token at all is an error.
//
// Names, display names and capabilities are also split into words at
// camelCase, digit and punctuation boundaries ("ChatOCR" adds "chat" and
// "ocr"), and concatenated lower-case names ("airqualityforecast") are
// segmented against the words of all indexed agents.
//
// # Scoring
//
// bm25 is BM25F over five fields with these weights: name 2, capabilities
// 2, display name 1, description 1, examples 0.5 (length normalisation b =
// 0.5 for the short fields, 0.3 for description and examples; k1 = 1.6;
// idf = ln(1 + (N - df + 0.5)/(df + 0.5))). The reported Score is the BM25F
// score divided by the sum of the idf of the query's terms, its value if
// every term matched with unbounded frequency, so it lies in (0, 1] and does
// not depend on the other results: an agent matching every term once in its
// description scores about 0.4, one matching a few of several terms
// 0.05–0.2. Coverage is the fraction of the query's terms the agent
// matched.
//
// overlap is the seed's scorer with whole-stem matching: the fraction of
// the query's terms found in the agent's description, capabilities or name.
// Its Score equals its Coverage.
//
// Results are ordered by score, then by name; agents that match no term are
// never returned. The choice of parameters, and what each technique gains
// on the MetaTool benchmark, is in docs/DESIGN.md.
//
// # Performance
//
// Postings are kept per term, sorted by document id (4 bytes of id and 8 of
// per-field counts and metadata each), and updated in place for one agent
// on every change. A query reads only the postings of its terms, with
// MaxScore pruning against a heap of the best k results and bounds kept per
// term. On a two-core machine, a three-word query over 100,000 agents takes
// under 100 µs at the median, and an agent costs about 1.7 KiB of heap,
// record included. See discovery/bench_test.go.
//
// # Concurrency
//
// An Engine is safe for concurrent use. Searches run in parallel under a
// read lock; updates take the write lock for the few microseconds that
// re-indexing one agent takes. The host callbacks of [Options] (Now,
// Available) are called without any Engine lock held.
//
// # Errors
//
// [Engine.Search] returns errors wrapping [ErrEmptyQuery] (no token in the
// query) or [ErrInvalidQuery] (a query longer than [MaxQueryRunes]
// characters, or an option out of range); [Code] maps both to
// "invalid_argument", which front-ends answer with HTTP 400. Updates never
// fail.
package discovery
