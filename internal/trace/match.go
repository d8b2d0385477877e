package trace

// Matcher pairs releases with the allocations they release, by resource
// type and resource ID, with sp-rtrace's leak semantics: on a resource type
// that counts references, an allocation of an ID already live adds a
// reference and a release takes one away, the allocation being released
// at zero; on other types an allocation of a live ID takes the ID over
// (the older allocation, never matched, stays unreleased) and a release
// releases at once. A release of an ID not live is ignored. Each live
// allocation carries a value of the caller's.
type Matcher[T any] struct {
	live map[matchKey]*held[T]
}

type matchKey struct {
	res int
	id  uint64
}

type held[T any] struct {
	v    T
	refs int
}

// NewMatcher returns an empty Matcher.
func NewMatcher[T any]() *Matcher[T] { return &Matcher[T]{live: map[matchKey]*held[T]{}} }

// Alloc takes allocation c, carrying v, into account. It returns false when
// c only added a reference to a live allocation (v is not kept).
func (m *Matcher[T]) Alloc(c *Call, refcount bool, v T) bool {
	k := matchKey{c.Res, c.ID}
	if h := m.live[k]; h != nil && refcount {
		h.refs++
		return false
	}
	m.live[k] = &held[T]{v: v, refs: 1}
	return true
}

// Release takes release c into account and returns the value of the
// allocation it released, if it released one.
func (m *Matcher[T]) Release(c *Call, refcount bool) (v T, released bool) {
	k := matchKey{c.Res, c.ID}
	h := m.live[k]
	if h == nil {
		return v, false
	}
	if h.refs--; h.refs > 0 && refcount {
		return v, false
	}
	delete(m.live, k)
	return h.v, true
}

// Len is the number of live allocations (those taken over not counted).
func (m *Matcher[T]) Len() int { return len(m.live) }
