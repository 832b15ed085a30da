package httpx

import (
	"math"
	"strconv"
	"time"

	"provisioner/platform/fault"
	"provisioner/platform/provision"
)

// Answers are the messages of a route that drives a resource: Done for its success (201 when
// Created, else 200), Failed for the 502 of a provider that did not succeed.
type Answers struct {
	Created      bool
	Done, Failed string
}

// Outcome is the one answer to a request that drove a resource (provision.Run), with data the
// resource as it stands: done → 201 or 200; pending → 502 with Retry-After (the seconds until the
// Finisher's next attempt, which honours the provider's own Retry-After); failed → 502; conflict →
// the refusal (409), carrying data when the resource remains.
func Outcome[T any](o provision.Outcome, data *T, a Answers) (*Response[T], error) {
	switch o.Result {
	case provision.Done:
		if a.Created {
			return Created(a.Done, *data), nil
		}
		return OK(a.Done, *data), nil
	case provision.Conflict:
		if fe, ok := fault.As(o.Err); ok && data != nil {
			c := *fe
			c.Data = *data
			return nil, &c
		}
		return nil, o.Err
	}
	e := BadGateway(a.Failed, *data)
	if o.Result == provision.Pending {
		e = e.WithHeader("Retry-After", strconv.FormatInt(max(1, int64(math.Ceil(time.Until(o.RetryAt).Seconds()))), 10))
	}
	return nil, e
}

// Driven is Outcome for a service's (row, outcome, error): the error when there is one.
func Driven[R, T any](row *R, o provision.Outcome, err error, view func(*R) T, a Answers) (*Response[T], error) {
	if err != nil {
		return nil, err
	}
	if row == nil {
		return Outcome[T](o, nil, a)
	}
	v := view(row)
	return Outcome(o, &v, a)
}
