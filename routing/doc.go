// Package routing is the orchestrator (docs/API.md#routing): it takes a
// user's message, classifies it against the registered agents, and routes
// it, asks for clarification, or falls back to the default agent.
//
// The pieces, each usable on its own:
//
//   - [Classifier], the extension point: one method, Classify(ctx, text),
//     returning a [Classification] (the agent, a confidence in [0, 1],
//     whether the message is ambiguous, an intent summary, the language,
//     entities, and the best [Candidate] agents).
//   - [Lexical], the built-in default classifier: no network, no model
//     files; it learns from the agents' examples, capabilities,
//     descriptions and display names, and retrains in the background when
//     the registry changes. [LLM] asks an OpenAI-compatible endpoint and
//     falls back to the lexical classifier per request.
//   - [Gate], the confidence gate (docs/API.md#the-confidence-gate), a
//     pure function.
//   - [Router], the pipeline: sessions, classification, gate,
//     clarification, dispatch and fallback.
//
// # The lexical classifier
//
//	lex := routing.NewLexical(nil)
//	defer lex.Close()
//	stop := lex.Follow(reg) // trains now, then after every registry change
//	defer stop()
//	c, err := lex.Classify(ctx, "I forgot my Okta password")
//
// It is a softmax regression over three kinds of features of the text —
// Porter2-stemmed words, pairs of adjacent words (with the start and end
// of the message as words), and character 2–4-grams of each word — with
// sublinear tf-idf weights, each kind normalised separately. Training is
// stochastic gradient descent with a decaying learning rate, classes
// weighted equally and no intercepts (no agent is preferred a priori);
// samples the model already gets right are skipped for a while, so a
// registry of 150 agents × 100 examples trains in about 1.5 s of CPU time
// per model (the served model and the calibration model train in
// parallel). Every agent's examples are training texts; so are its
// display name with its capabilities, and each sentence of its
// description. The default agent learns from its examples only, and then
// competes as "none of the others".
//
// # Confidence
//
// The confidence is calibrated: among messages like the training examples,
// about that fraction of those given confidence c go to the right agent,
// so the gate's thresholds (0.7 by default) mean what they say. It is
// σ(α·(ln p + 3·coverage) + β), where p is the top agent's probability
// and coverage the idf-weighted share of the message's features that the
// agents' texts contain — an out-of-scope message uses words no agent
// knows, so it scores low even when one agent takes most of the
// probability. α and β are fitted on held-out examples (every fifth
// example of agents that have five or more, by a second model trained in
// parallel on the rest); a registry with too few examples gets values
// fitted on many small registries drawn from CLINC150, which assume that
// about a fifth of the messages belong to no agent.
//
// A message is [Classification.Ambiguous] when the runner-up's probability
// is at least 0.9 of the top agent's ([LexicalOptions.AmbiguityRatio]).
//
// Measured on CLINC150 (150 intents, 100 examples each; threshold picked
// and scored on the validation file): 92.3% in-scope accuracy with 68%
// out-of-scope recall; one message is classified in about 30 µs. See
// docs/BENCHMARKS.md.
//
// # Concurrency
//
// Classifiers, the gate and the router are safe for concurrent use. A
// [Lexical] classifier answers from an immutable model that a training
// replaces atomically, so Classify never waits for training; removals and
// TTL staleness take effect at once, before any retraining. A classifier
// that follows a registry owns a goroutine: Close stops it.
//
// # Errors
//
// Classify returns [ErrNoAgents] when there is no agent to route to and
// [ErrClosed] after Close; context errors are returned as they are.
package routing
