package coherent

import (
	"context"
	"strconv"
	"sync"
	"time"
)

// CacheOptions configures NewCache.
type CacheOptions[K comparable, V any] struct {
	// Table is the table whose changes invalidate entries (it must carry the coherent_notify
	// trigger).
	Table string
	// Also lists further tables whose changes invalidate entries: their coherent_notify trigger
	// must name rows by the same tag (e.g. a child table watched by its parent's id).
	Also []string
	// Tag names the row an entry was loaded from, as the trigger of Table names it (the value of
	// the column given to coherent_notify). A change notified for a tag drops its entries. It is
	// called again on an entry when it is replaced, dropped or evicted: it must depend on its
	// arguments only.
	Tag func(K, V) string
	// Key, when set, is the one key a tag can drop: the cache is keyed by the tagged column itself
	// (Key(Tag(k, v)) is k, and no other tag gives k), so no index from tags to keys is kept.
	// IDTag and IDKey are Tag and Key for caches keyed by the integer id the trigger names.
	Key func(tag string) (K, bool)
	// TTL bounds an entry's age whatever happens (default 1 minute).
	TTL time.Duration
	// MaxEntries bounds the size; past it, arbitrary entries are dropped (default 100,000).
	MaxEntries int
}

// Cache is a read-through cache of values loaded from the control database, kept coherent by the
// Bus: an entry is served only while the bus is Fresh, and dropped when a change to its row is
// notified. Safe for concurrent use.
type Cache[K comparable, V any] struct {
	bus *Bus
	o   CacheOptions[K, V]

	base time.Time // entries' load times are monotonic nanoseconds since base

	mu      sync.RWMutex
	entries map[K]entry[V]
	byTag   map[string][]K    // tag → keys; nil when o.Key is set
	gen     uint64            // counts invalidations
	dropped map[string]uint64 // tag → gen at which it was last invalidated (recent ones)
	all     uint64            // gen of the last drop of everything
	pruned  time.Time
	n       counts
}

// entry is a cached value and when it was loaded (nanoseconds since the cache's base); its tag
// is not kept but computed again by o.Tag when needed (a replacement, a drop, an eviction).
type entry[V any] struct {
	v  V
	at int64
}

// IDTag is the Tag of a cache keyed by the integer id the trigger names (with IDKey).
func IDTag[V any](id int64, _ V) string { return strconv.FormatInt(id, 10) }

// IDKey is the Key of a cache keyed by the integer id the trigger names: the id a tag is the
// decimal text of (as IDTag writes it).
func IDKey(tag string) (int64, bool) {
	id, err := strconv.ParseInt(tag, 10, 64)
	return id, err == nil && strconv.FormatInt(id, 10) == tag
}

// NewCache registers a cache of o.Table on bus. A nil bus gives a cache that always loads.
func NewCache[K comparable, V any](bus *Bus, o CacheOptions[K, V]) *Cache[K, V] {
	if o.TTL <= 0 {
		o.TTL = time.Minute
	}
	if o.MaxEntries <= 0 {
		o.MaxEntries = 100_000
	}
	c := &Cache[K, V]{bus: bus, o: o, base: time.Now(), entries: map[K]entry[V]{}, dropped: map[string]uint64{}}
	if o.Key == nil {
		c.byTag = map[string][]K{}
	}
	if bus != nil {
		bus.subscribe(append([]string{o.Table}, o.Also...), c.invalidate, c.reset, c)
	}
	return c
}

// Get returns the value of k: from the cache when the bus is fresh and the entry is younger than
// the TTL, else from load, whose value is kept if no change to its row was notified while it ran.
// Errors are returned as is and never cached (so "not found" is always read again).
func (c *Cache[K, V]) Get(ctx context.Context, k K, load func(context.Context) (V, error)) (V, error) {
	fresh := c.bus.Fresh()
	if fresh {
		c.mu.RLock()
		e, ok := c.entries[k]
		c.mu.RUnlock()
		if ok && c.now()-e.at < int64(c.o.TTL) {
			c.n.hit.Add(1)
			return e.v, nil
		}
		c.n.miss.Add(1)
	} else {
		c.n.bypass.Add(1)
	}
	c.mu.RLock()
	g := c.gen
	c.mu.RUnlock()
	start := time.Now()
	v, err := load(ctx)
	if err != nil || !fresh || time.Since(start) > 5*time.Second {
		return v, err
	}
	tag := c.o.Tag(k, v)
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.all > g || c.dropped[tag] > g || !c.bus.Fresh() {
		return v, nil // its row changed (or the feed lapsed) while it was read: do not keep it
	}
	if len(c.entries) >= c.o.MaxEntries {
		c.evictLocked(c.o.MaxEntries / 10)
	}
	if c.byTag != nil {
		old, had := c.entries[k]
		oldTag := ""
		if had {
			oldTag = c.o.Tag(k, old.v)
			if oldTag != tag {
				c.untagLocked(oldTag, k)
			}
		}
		if !had || oldTag != tag {
			c.byTag[tag] = append(c.byTag[tag], k)
		}
	}
	c.entries[k] = entry[V]{v: v, at: c.now()}
	return v, nil
}

// now is the monotonic time since the cache's base, in nanoseconds.
func (c *Cache[K, V]) now() int64 { return int64(time.Since(c.base)) }

// Len is the number of entries held.
func (c *Cache[K, V]) Len() int {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return len(c.entries)
}

func (c *Cache[K, V]) table() string     { return c.o.Table }
func (c *Cache[K, V]) len() int          { return c.Len() }
func (c *Cache[K, V]) counters() *counts { return &c.n }

func (c *Cache[K, V]) invalidate(tags []string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.gen++
	if tags == nil {
		c.dropAllLocked()
		return
	}
	for _, t := range tags {
		c.dropped[t] = c.gen
		if c.byTag == nil {
			if k, ok := c.o.Key(t); ok {
				delete(c.entries, k)
			}
			continue
		}
		for _, k := range c.byTag[t] {
			if e, ok := c.entries[k]; ok && c.o.Tag(k, e.v) == t {
				delete(c.entries, k)
			}
		}
		delete(c.byTag, t)
	}
	// Loads finish within seconds (longer ones are not kept): older marks are no longer needed.
	if time.Since(c.pruned) > 10*time.Second {
		c.dropped = map[string]uint64{}
		c.all = c.gen
		c.pruned = time.Now()
	}
}

func (c *Cache[K, V]) reset() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.gen++
	c.dropAllLocked()
}

func (c *Cache[K, V]) dropAllLocked() {
	c.all = c.gen
	c.entries = map[K]entry[V]{}
	if c.byTag != nil {
		c.byTag = map[string][]K{}
	}
	c.dropped = map[string]uint64{}
	c.pruned = time.Now()
}

func (c *Cache[K, V]) untagLocked(tag string, k K) {
	ks := c.byTag[tag]
	for i, x := range ks {
		if x == k {
			ks[i] = ks[len(ks)-1]
			ks = ks[:len(ks)-1]
			break
		}
	}
	if len(ks) == 0 {
		delete(c.byTag, tag)
	} else {
		c.byTag[tag] = ks
	}
}

func (c *Cache[K, V]) evictLocked(n int) {
	for k, e := range c.entries {
		if n <= 0 {
			return
		}
		delete(c.entries, k)
		if c.byTag != nil {
			c.untagLocked(c.o.Tag(k, e.v), k)
		}
		n--
	}
}
