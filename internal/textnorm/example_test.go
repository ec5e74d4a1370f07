package textnorm_test

import (
	"fmt"

	"github.com/agentmesh/agentmesh/internal/textnorm"
)

func Example() {
	var terms []string
	for _, tok := range textnorm.Tokens(nil, "Budgets for the cost_center, please!") {
		if !textnorm.IsStopWord(tok) {
			terms = append(terms, textnorm.Stem(tok))
		}
	}
	fmt.Println(terms)
	fmt.Println(textnorm.SplitIdentifier(nil, "ChatOCRTool"))
	known := func(w string) bool { return w == "air" || w == "quality" || w == "forecast" }
	fmt.Println(textnorm.Segment(nil, "airqualityforecast", known))
	// Output:
	// [budget cost center]
	// [chat ocr tool]
	// [air quality forecast]
}
