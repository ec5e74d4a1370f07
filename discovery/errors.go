package discovery

import (
	"errors"

	"github.com/agentmesh/agentmesh/internal/apierr"
)

// Sentinel errors returned by [Engine.Search]. Match them with
// [errors.Is]. Both have code invalid_argument ([Code]) and describe
// themselves ([apierr.Describe]): their message without the "discovery: "
// prefix, as do the errors with detail made from them.
var (
	// ErrEmptyQuery: the query has no token (no letter or digit at all).
	ErrEmptyQuery = apierr.New("discovery", apierr.CodeInvalidArgument, "empty query")
	// ErrInvalidQuery: the query is longer than [MaxQueryRunes] characters,
	// or an option of the [Query] is out of range, such as an unknown scorer
	// or a MinScore outside [0, 1].
	ErrInvalidQuery = apierr.New("discovery", apierr.CodeInvalidArgument, "invalid query")
)

// Code returns the error code of an error returned by this package
// ("invalid_argument"), or "" when the error is not one of this package's.
func Code(err error) string {
	for _, s := range []*apierr.Error{ErrEmptyQuery, ErrInvalidQuery} {
		if errors.Is(err, s) {
			return s.Code()
		}
	}
	return ""
}
