package routing_test

import (
	"context"
	"encoding/json"
	"errors"
	"math"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentmesh/agentmesh/internal/harness/clocktest"
	"github.com/agentmesh/agentmesh/internal/harness/registrytest"
	"github.com/agentmesh/agentmesh/registry"
	"github.com/agentmesh/agentmesh/routing"
	"github.com/agentmesh/agentmesh/store/memstore"
)

var _ routing.Classifier = (*routing.Lexical)(nil)

func lexTrained(t *testing.T, opts *routing.LexicalOptions, agents []registry.Agent) *routing.Lexical {
	t.Helper()
	l := routing.NewLexical(opts)
	t.Cleanup(func() { l.Close() })
	require.NoError(t, l.Reset(context.Background(), agents))
	return l
}

func lexClassify(t *testing.T, l routing.Classifier, text string) routing.Classification {
	t.Helper()
	c, err := l.Classify(context.Background(), text)
	require.NoError(t, err, text)
	return c
}

// lexHelpDesk is a registry learned from examples only.
func lexHelpDesk() []registry.Agent {
	return []registry.Agent{
		{Name: "weather", DisplayName: "Weather", Examples: []string{
			"what's the weather in Paris", "will it rain tomorrow", "is it going to snow this weekend",
			"how hot will it be today", "weather forecast for Berlin", "do I need an umbrella today",
			"what is the temperature outside", "is it sunny in Madrid"}},
		{Name: "translate", DisplayName: "Translator", Examples: []string{
			"translate hello into French", "how do you say thank you in Spanish", "what does danke mean",
			"translate this sentence to German", "say good morning in Italian", "what is the Japanese word for cat",
			"how would I say I love you in Portuguese", "translate goodbye to Dutch"}},
		{Name: "timer", DisplayName: "Timer", Examples: []string{
			"set a timer for 10 minutes", "start a 5 minute timer", "timer for half an hour please",
			"cancel my timer", "how much time is left on the timer", "set a countdown for 20 minutes",
			"remind me in 15 minutes", "start the kitchen timer"}},
		{Name: "fallback", IsDefault: true, Description: "Anything else."},
	}
}

func TestLexicalLearnsFromExamples(t *testing.T) {
	l := lexTrained(t, nil, lexHelpDesk())
	for text, want := range map[string]string{
		"what will the weather be like in Rome":  "weather",
		"is it raining in London right now":      "weather",
		"how do I say good night in French":      "translate",
		"translate I am hungry into Spanish":     "translate",
		"set a timer for three minutes":          "timer",
		"please start a 45 minute timer for me":  "timer",
		"WEATHER FORECAST for the weekend, pls!": "weather",
	} {
		c := lexClassify(t, l, text)
		assert.Equal(t, want, c.AgentID, text)
		assert.GreaterOrEqual(t, c.Confidence, 0.0, text)
		assert.LessOrEqual(t, c.Confidence, 1.0, text)
		require.NotEmpty(t, c.Candidates, text)
		assert.Equal(t, c.AgentID, c.Candidates[0].AgentID, text)
		for i := 1; i < len(c.Candidates); i++ {
			assert.GreaterOrEqual(t, c.Candidates[i-1].Score, c.Candidates[i].Score, text)
		}
		assert.NotNil(t, c.Entities)
		assert.Equal(t, "en", c.DetectedLanguage)
		assert.Contains(t, c.IntentSummary, "request for ")
	}
	c := lexClassify(t, l, "set a timer for three minutes")
	assert.GreaterOrEqual(t, c.Confidence, registry.DefaultConfidenceThreshold, "a clear match clears the default threshold")
	assert.False(t, c.Ambiguous)
	assert.Len(t, c.Candidates, routing.DefaultCandidates)
	assert.Equal(t, "request for Timer (timer, minutes, set)", c.IntentSummary)

	info, ok := l.Info()
	require.True(t, ok)
	assert.Equal(t, 3, info.Agents, "the default agent without examples is no class")
	assert.Equal(t, 24+3, info.Texts, "examples plus one display-name text per agent")
	assert.Equal(t, "fallback", info.Default)
	assert.Positive(t, info.Features)
}

func TestLexicalCapabilitiesOnly(t *testing.T) {
	l := lexTrained(t, nil, []registry.Agent{
		{Name: "pw", DisplayName: "Password Reset", Capabilities: []string{"password", "accountUnlock", "okta"},
			Description: "Resets passwords and unlocks Okta and Active Directory accounts."},
		{Name: "payroll", DisplayName: "Payroll", Capabilities: []string{"salary", "payslips", "tax-forms"},
			Description: "Answers questions about salary, payslips, W-2 tax forms and direct deposit."},
		{Name: "travel", DisplayName: "Travel Desk", Capabilities: []string{"flights", "hotels"},
			Description: "Books business flights and hotels. Handles travel expenses."},
	})
	for text, want := range map[string]string{
		"I need to reset my okta password":          "pw",
		"please unlock my account":                  "pw",
		"where is my W-2 tax form":                  "payroll",
		"question about my salary":                  "payroll",
		"book a hotel for my trip to Berlin":        "travel",
		"how do I file travel expenses for flights": "travel",
	} {
		assert.Equal(t, want, lexClassify(t, l, text).AgentID, text)
	}
}

func TestLexicalDefaultAgent(t *testing.T) {
	agents := lexHelpDesk()
	agents[3].Examples = []string{"tell me a joke", "who won the game last night", "what's your favourite color",
		"sing me a song", "what is the meaning of life", "recommend a good book"}
	l := lexTrained(t, nil, agents)
	c := lexClassify(t, l, "tell me a funny joke")
	assert.Equal(t, "fallback", c.AgentID, "a message like the default agent's examples goes to it")
	assert.Equal(t, "out of scope for the specialist agents (like the default agent's examples)", c.IntentSummary)
	assert.Equal(t, "timer", lexClassify(t, l, "set a timer for 10 minutes").AgentID)

	// A registry with only the default agent: it is the answer, with no
	// confidence; with no agent at all there is no answer.
	l = lexTrained(t, nil, []registry.Agent{{Name: "only", IsDefault: true, Description: "All."}})
	c = lexClassify(t, l, "anything at all")
	assert.Equal(t, "only", c.AgentID)
	assert.Zero(t, c.Confidence)
	assert.Empty(t, c.Candidates)
}

func TestLexicalNoAgents(t *testing.T) {
	ctx := context.Background()
	var zero routing.Lexical
	_, err := zero.Classify(ctx, "hello")
	assert.ErrorIs(t, err, routing.ErrNoAgents, "zero value")
	_, ok := zero.Info()
	assert.False(t, ok)

	l := lexTrained(t, nil, nil)
	_, err = l.Classify(ctx, "hello")
	assert.ErrorIs(t, err, routing.ErrNoAgents, "empty registry")

	// Agents with no words to learn from are no candidates.
	l = lexTrained(t, nil, []registry.Agent{{Name: "mute", Description: "?!", Capabilities: []string{"--"}}})
	_, err = l.Classify(ctx, "hello")
	assert.ErrorIs(t, err, routing.ErrNoAgents)

	canceled, cancel := context.WithCancel(ctx)
	cancel()
	_, err = l.Classify(canceled, "hello")
	assert.ErrorIs(t, err, context.Canceled)
}

func TestLexicalNoWords(t *testing.T) {
	l := lexTrained(t, nil, lexHelpDesk())
	for _, text := range []string{"", "   ", "?!", "\xff\xfe", "…—…"} {
		c := lexClassify(t, l, text)
		assert.Equal(t, "fallback", c.AgentID, "%q", text)
		assert.Zero(t, c.Confidence, "%q", text)
	}
	agents := lexHelpDesk()[:3]
	l = lexTrained(t, nil, agents)
	c := lexClassify(t, l, "?!")
	assert.Empty(t, c.AgentID, "no default agent: no agent (the gate falls back)")
}

func TestLexicalAmbiguous(t *testing.T) {
	twins := []registry.Agent{
		{Name: "a", Examples: []string{"check the status of my order", "where is my package"}},
		{Name: "b", Examples: []string{"check the status of my order", "where is my package"}},
		{Name: "c", Examples: []string{"set an alarm for 7 am", "wake me up at six"}},
	}
	l := lexTrained(t, nil, twins)
	c := lexClassify(t, l, "check the status of my order")
	assert.True(t, c.Ambiguous, "two agents learned the same examples")
	require.Len(t, c.Candidates, 3)
	assert.InDelta(t, c.Candidates[0].Score, c.Candidates[1].Score, 0.05)
	assert.ElementsMatch(t, []string{"a", "b"}, []string{c.Candidates[0].AgentID, c.Candidates[1].AgentID})
	assert.False(t, lexClassify(t, l, "wake me up at 7 am").Ambiguous)

	// A ratio of 1 or more never flags ambiguity; fewer candidates.
	l = lexTrained(t, &routing.LexicalOptions{AmbiguityRatio: 1, Candidates: 1}, twins)
	c = lexClassify(t, l, "check the status of my order")
	assert.False(t, c.Ambiguous)
	assert.Len(t, c.Candidates, 1)
	l = lexTrained(t, &routing.LexicalOptions{Candidates: -1}, twins)
	assert.Empty(t, lexClassify(t, l, "check the status of my order").Candidates)
}

func TestLexicalConfidenceOrdersMatches(t *testing.T) {
	// The more a message looks like an agent's examples, the higher the
	// confidence: a paraphrase scores above a vague message that shares
	// a word, which scores above one that shares none.
	l := lexTrained(t, nil, lexHelpDesk())
	strong := lexClassify(t, l, "set a timer for 10 minutes").Confidence
	weak := lexClassify(t, l, "my cat knocked over the minutes of the meeting").Confidence
	none := lexClassify(t, l, "photosynthesis chlorophyll mitochondria").Confidence
	assert.Greater(t, strong, weak)
	assert.Greater(t, weak, none)
	assert.Less(t, none, registry.DefaultConfidenceThreshold, "unrelated words do not clear the default threshold")
}

func TestLexicalLanguage(t *testing.T) {
	l := lexTrained(t, nil, lexHelpDesk())
	for text, want := range map[string]string{
		"what's the weather in Paris":                "en",
		"¿qué tiempo hace en Madrid? necesito saber": "es",
		"quel temps fait-il à Paris, je vous prie":   "fr",
		"wie ist das Wetter in Berlin bitte":         "de",
		"今日の天気はどうですか":                                "ja",
		"今天天气怎么样":                                    "zh",
		"오늘 날씨 어때요":                                  "ko",
		"какая сегодня погода":                       "ru",
		"12345":                                      "en",
	} {
		assert.Equal(t, want, lexClassify(t, l, text).DetectedLanguage, text)
	}
}

func TestClassificationJSON(t *testing.T) {
	c := routing.Classification{AgentID: "a", Confidence: 0.9, IntentSummary: "request for A",
		DetectedLanguage: "en", Entities: map[string]any{}, Candidates: []routing.Candidate{{AgentID: "a", Score: 0.9}}}
	b, err := json.Marshal(c)
	require.NoError(t, err)
	assert.JSONEq(t, `{"agent_id":"a","confidence":0.9,"ambiguous":false,"intent":"request for A","language":"en",
		"entities":{},"candidates":[{"agent_id":"a","score":0.9}]}`, string(b))
}

func TestLexicalFollowRegistry(t *testing.T) {
	ctx := context.Background()
	reg, err := registry.New(ctx, memstore.New(), nil)
	require.NoError(t, err)
	defer reg.Close()
	agents := lexHelpDesk()
	for i := range agents {
		agents[i].Endpoint = "https://" + agents[i].Name + ".example.com/task"
		agents[i].Description = agents[i].DisplayName + " agent"
		if agents[i].IsDefault {
			continue
		}
		_, _, err := reg.Register(ctx, agents[i])
		require.NoError(t, err)
	}
	l := routing.NewLexical(&routing.LexicalOptions{Debounce: 10 * time.Millisecond})
	defer l.Close()
	stop := l.Follow(reg)
	defer stop()
	assert.Equal(t, "timer", lexClassify(t, l, "set a timer for 10 minutes").AgentID, "trained when Follow returns")

	// A new agent is learned in the background.
	_, _, err = reg.Register(ctx, registry.Agent{Name: "music", Endpoint: "https://music.example.com/task",
		Description: "Plays songs", Examples: []string{"play some jazz", "play my workout playlist", "next song please"}})
	require.NoError(t, err)
	require.NoError(t, l.Sync(ctx))
	assert.Equal(t, "music", lexClassify(t, l, "play some jazz music").AgentID)

	// A removal takes effect at once, before any retraining.
	require.NoError(t, reg.Delete(ctx, "timer"))
	assert.NotEqual(t, "timer", lexClassify(t, l, "set a timer for 10 minutes").AgentID)
	require.NoError(t, l.Sync(ctx))
	info, _ := l.Info()
	assert.Equal(t, 3, info.Agents)

	// After stop, changes are not followed.
	stop()
	_, _, err = reg.Register(ctx, registry.Agent{Name: "news", Endpoint: "https://news.example.com/task",
		Description: "Headlines", Examples: []string{"what's in the news", "latest headlines"}})
	require.NoError(t, err)
	require.NoError(t, l.Sync(ctx))
	assert.NotEqual(t, "news", lexClassify(t, l, "latest news headlines").AgentID)
}

// The first agents of an empty mesh are routed to from the first request:
// Classify does not answer "no agents" while the first model trains, it
// hurries the training past the debounce and waits for it.
func TestLexicalFirstModelIsWaitedFor(t *testing.T) {
	ctx := context.Background()
	reg, err := registry.New(ctx, memstore.New(), nil)
	require.NoError(t, err)
	defer reg.Close()
	l := routing.NewLexical(&routing.LexicalOptions{Debounce: time.Hour})
	defer l.Close()
	defer l.Follow(reg)()
	assert.True(t, l.Ready(), "nothing to learn: ready")
	_, err = l.Classify(ctx, "play some jazz")
	assert.ErrorIs(t, err, routing.ErrNoAgents)

	_, _, err = reg.Register(ctx, registry.Agent{Name: "music", Endpoint: "https://music.example.com/task",
		Description: "Plays songs", Examples: []string{"play some jazz", "play my workout playlist", "next song please"}})
	require.NoError(t, err)
	assert.True(t, l.Ready(), "a ready classifier stays ready while it learns its first agents")
	start := time.Now()
	c, err := l.Classify(ctx, "play some jazz music")
	require.NoError(t, err)
	assert.Equal(t, "music", c.AgentID)
	assert.Less(t, time.Since(start), time.Minute, "the hour of debounce was cut short")
	assert.True(t, l.Ready())
}

// Past ReadyWait, a classifier that has not learned its first agents
// says so with ErrNotReady (unavailable), and a cancelled wait with the
// context's error.
func TestLexicalNotReady(t *testing.T) {
	ctx := context.Background()
	reg, err := registry.New(ctx, memstore.New(), nil)
	require.NoError(t, err)
	defer reg.Close()
	l := routing.NewLexical(&routing.LexicalOptions{Debounce: time.Hour, ReadyWait: -1})
	defer l.Close()
	defer l.Follow(reg)()
	_, _, err = reg.Register(ctx, registry.Agent{Name: "music", Endpoint: "https://music.example.com/task",
		Description: "Plays songs", Examples: []string{"play some jazz"}})
	require.NoError(t, err)
	_, err = l.Classify(ctx, "play some jazz")
	require.ErrorIs(t, err, routing.ErrNotReady)
	assert.ErrorIs(t, err, routing.ErrUnavailable)

	canceled, cancel := context.WithCancel(ctx)
	cancel()
	_, err = l.Classify(canceled, "play some jazz")
	assert.ErrorIs(t, err, context.Canceled)
}

func TestLexicalStaleAgents(t *testing.T) {
	clock := clocktest.New(time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC))
	agents := lexHelpDesk()
	for i := range agents {
		agents[i].LastSeen = clock.Now()
	}
	agents[2].TTLSeconds = 30 // timer
	agents[3].TTLSeconds = 30 // the default agent
	src := registrytest.NewSource(agents...)
	l := routing.NewLexical(&routing.LexicalOptions{Now: clock.Now, Debounce: time.Hour})
	defer l.Close()
	defer l.Follow(src)()
	assert.Equal(t, "timer", lexClassify(t, l, "set a timer for 10 minutes").AgentID)

	clock.Advance(31 * time.Second) // timer and the default agent are stale
	c := lexClassify(t, l, "set a timer for 10 minutes")
	assert.NotEqual(t, "timer", c.AgentID)
	for _, cand := range c.Candidates {
		assert.NotEqual(t, "timer", cand.AgentID)
	}
	assert.Empty(t, lexClassify(t, l, "?!").AgentID, "a stale default agent is not picked")

	// A heartbeat revives it at once (no retraining: Debounce is an hour).
	hb := agents[2]
	hb.LastSeen = clock.Now()
	src.Emit(registry.Event{Type: registry.EventHeartbeat, Agent: hb})
	assert.Equal(t, "timer", lexClassify(t, l, "set a timer for 10 minutes").AgentID)

	// All specialists gone: the default agent, else no agents.
	for _, a := range agents[:3] {
		src.Emit(registry.Event{Type: registry.EventDelete, Agent: a})
	}
	_, err := l.Classify(context.Background(), "set a timer")
	assert.ErrorIs(t, err, routing.ErrNoAgents, "the default agent is stale too")
	def := agents[3]
	def.LastSeen = clock.Now()
	src.Emit(registry.Event{Type: registry.EventHeartbeat, Agent: def})
	assert.Equal(t, "fallback", lexClassify(t, l, "set a timer").AgentID)
}

func TestLexicalClose(t *testing.T) {
	src := registrytest.NewSource(lexHelpDesk()...)
	l := routing.NewLexical(nil)
	l.Follow(src)
	require.NoError(t, l.Close())
	require.NoError(t, l.Close(), "idempotent")
	_, err := l.Classify(context.Background(), "set a timer")
	assert.ErrorIs(t, err, routing.ErrClosed)
	assert.ErrorIs(t, l.Reset(context.Background(), lexHelpDesk()), routing.ErrClosed)
	assert.ErrorIs(t, l.Sync(context.Background()), routing.ErrClosed)
	src.Emit(registry.Event{Type: registry.EventPut, Agent: registry.Agent{Name: "x", Examples: []string{"x"}}})
	assert.False(t, src.Subscribed(), "Close cancelled the subscription")
	l.Follow(src)() // following a closed classifier does nothing
	assert.False(t, src.Subscribed())

	// Concurrent Close calls all return after the trainer stopped.
	l = routing.NewLexical(nil)
	l.Follow(registrytest.NewSource(lexHelpDesk()...))
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() { assert.NoError(t, l.Close()) })
	}
	wg.Wait()
}

func TestLexicalSyncCanceled(t *testing.T) {
	l := routing.NewLexical(&routing.LexicalOptions{Debounce: time.Hour})
	defer l.Close()
	src := registrytest.NewSource(lexHelpDesk()...)
	defer l.Follow(src)()
	src.Emit(registry.Event{Type: registry.EventPut, Agent: registry.Agent{Name: "x", Examples: []string{"xylophone lessons"}}})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	assert.ErrorIs(t, l.Sync(ctx), context.DeadlineExceeded, "the trainer waits an hour")
	require.NoError(t, l.Retrain(context.Background()), "a direct retrain does not wait")
	assert.Equal(t, "x", lexClassify(t, l, "xylophone lessons").AgentID)
}

func TestLexicalConcurrent(t *testing.T) {
	// Classify, Apply, Retrain, Reset and Info from many goroutines (run
	// with -race).
	l := routing.NewLexical(&routing.LexicalOptions{Debounce: time.Millisecond})
	defer l.Close()
	src := registrytest.NewSource(lexHelpDesk()...)
	defer l.Follow(src)()
	ctx := context.Background()
	var wg sync.WaitGroup
	stop := make(chan struct{})
	for range 4 {
		wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				c, err := l.Classify(ctx, "set a timer for 10 minutes")
				if err != nil {
					t.Error(err)
					return
				}
				if math.IsNaN(c.Confidence) {
					t.Error("NaN confidence")
					return
				}
				l.Info()
			}
		})
	}
	for i := range 20 {
		a := registry.Agent{Name: "extra", Examples: []string{"extra example number", time.Duration(i).String()}}
		src.Emit(registry.Event{Type: registry.EventPut, Agent: a})
		if i%5 == 0 {
			assert.NoError(t, l.Retrain(ctx))
		}
	}
	assert.NoError(t, l.Reset(ctx, lexHelpDesk()))
	assert.NoError(t, l.Sync(ctx))
	close(stop)
	wg.Wait()
	assert.Equal(t, "timer", lexClassify(t, l, "set a timer for 10 minutes").AgentID)
	_, err := l.Classify(ctx, "x")
	assert.False(t, errors.Is(err, routing.ErrNoAgents))
}
