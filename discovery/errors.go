package discovery

import "errors"

// CodeInvalidArgument is the SPEC error code of every error [Engine.Search]
// returns: front-ends answer it with HTTP 400.
const CodeInvalidArgument = "invalid_argument"

// Sentinel errors returned by [Engine.Search]. Match them with [errors.Is].
var (
	// ErrEmptyQuery: the query has no token (no letter or digit at all).
	ErrEmptyQuery = errors.New("discovery: empty query")
	// ErrInvalidQuery: an option of the [Query] is out of range, such as an
	// unknown scorer or a MinScore outside [0, 1].
	ErrInvalidQuery = errors.New("discovery: invalid query")
)

// Code maps an error returned by this package to its SPEC error code
// ("invalid_argument"), or "" when the error is not one of this package's.
func Code(err error) string {
	if errors.Is(err, ErrEmptyQuery) || errors.Is(err, ErrInvalidQuery) {
		return CodeInvalidArgument
	}
	return ""
}
