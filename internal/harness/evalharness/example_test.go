package evalharness_test

import (
	"fmt"

	"github.com/agentmesh/agentmesh/internal/harness/evalharness"
)

func ExampleEvaluate() {
	queries := []evalharness.Query{
		{Text: "weather in Paris", Relevant: []string{"weather"}, Subset: "single"},
		{Text: "stock price", Relevant: []string{"stocks"}, Subset: "single"},
	}
	// A ranker that always answers the same.
	rank := func(string) ([]string, error) { return []string{"weather", "news", "stocks"}, nil }
	rep, err := evalharness.Evaluate(queries, rank)
	if err != nil {
		fmt.Println(err)
		return
	}
	m := rep.Overall
	fmt.Printf("R@1 %.2f R@5 %.2f MRR %.3f\n", m.RecallAt1, m.RecallAt5, m.MRR)
	// Output:
	// R@1 0.50 R@5 1.00 MRR 0.667
}
