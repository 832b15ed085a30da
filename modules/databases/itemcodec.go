package databases

import (
	"encoding/binary"
	"time"
)

// A user's list of databases is cached in a compact binary form (one string a user, a few dozen
// bytes a database, holding no pointer) and decoded for each request: packItems and unpackItems
// give back items equal to those packed, times in UTC as item makes them.
//
// The form: the number of items, then for each: a flags byte, the integers as varints, the times
// as seconds and nanoseconds, then the strings, each as its length and bytes, except Engine and
// Status when they are one of the known values (an index instead) and DatabaseUser when it is
// DatabaseName.

const (
	packedReadOnly = 1 << iota
	packedLastActivity
	packedPurgeAt
	packedUserIsName // DatabaseUser is DatabaseName
)

// knownValues are the engine ids and statuses packed as an index (1-based; 0 means the text follows).
var knownValues = [...]string{"postgres", "mysql", StatusActive, StatusProvisioning, StatusPaused, StatusFailed,
	StatusPausing, StatusResuming, StatusDeleting, StatusDeleted, StatusRestoring}

// packItems is items in the compact form.
func packItems(items []Item) string {
	b := make([]byte, 0, 64*len(items)+1)
	b = binary.AppendUvarint(b, uint64(len(items)))
	for i := range items {
		it := &items[i]
		var flags byte
		if it.ReadOnly {
			flags |= packedReadOnly
		}
		if it.LastActivity != nil {
			flags |= packedLastActivity
		}
		if it.PurgeAt != nil {
			flags |= packedPurgeAt
		}
		if it.DatabaseUser == it.DatabaseName {
			flags |= packedUserIsName
		}
		b = append(b, flags)
		for _, n := range [...]int64{it.DatabaseInstanceID, it.UserID, it.UsedSpaceBytes, it.MaxSpaceBytes,
			int64(it.Port), int64(it.RotationDays)} {
			b = binary.AppendVarint(b, n)
		}
		b = packTime(b, it.CreatedAt)
		if it.LastActivity != nil {
			b = packTime(b, *it.LastActivity)
		}
		if it.PurgeAt != nil {
			b = packTime(b, *it.PurgeAt)
		}
		b = packKnown(b, it.Engine)
		b = packKnown(b, it.Status)
		b = packString(b, it.Name)
		b = packString(b, it.Host)
		b = packString(b, it.DatabaseName)
		if flags&packedUserIsName == 0 {
			b = packString(b, it.DatabaseUser)
		}
		b = packString(b, it.ReadOnlyReason)
		b = packString(b, it.ErrorMessage)
	}
	return string(b)
}

func packTime(b []byte, t time.Time) []byte {
	b = binary.AppendVarint(b, t.Unix())
	return binary.AppendUvarint(b, uint64(t.Nanosecond()))
}

func packString(b []byte, s string) []byte {
	b = binary.AppendUvarint(b, uint64(len(s)))
	return append(b, s...)
}

func packKnown(b []byte, s string) []byte {
	for i, k := range knownValues {
		if s == k {
			return append(b, byte(i+1))
		}
	}
	return packString(append(b, 0), s)
}

// unpackItems is the list packItems packed into s; its strings share s's bytes.
func unpackItems(s string) []Item {
	r := unpacker{s: s}
	items := make([]Item, r.uvarint())
	for i := range items {
		it := &items[i]
		flags := r.byte()
		it.ReadOnly = flags&packedReadOnly != 0
		it.DatabaseInstanceID, it.UserID = r.varint(), r.varint()
		it.UsedSpaceBytes, it.MaxSpaceBytes = r.varint(), r.varint()
		it.Port, it.RotationDays = int(r.varint()), int(r.varint())
		it.CreatedAt = r.time()
		if flags&packedLastActivity != 0 {
			t := r.time()
			it.LastActivity = &t
		}
		if flags&packedPurgeAt != 0 {
			t := r.time()
			it.PurgeAt = &t
		}
		it.Engine, it.Status = r.known(), r.known()
		it.Name, it.Host, it.DatabaseName = r.string(), r.string(), r.string()
		it.DatabaseUser = it.DatabaseName
		if flags&packedUserIsName == 0 {
			it.DatabaseUser = r.string()
		}
		it.ReadOnlyReason, it.ErrorMessage = r.string(), r.string()
	}
	return items
}

// unpacker reads the compact form (only ever what packItems wrote).
type unpacker struct {
	s   string
	off int
}

func (r *unpacker) byte() byte {
	c := r.s[r.off]
	r.off++
	return c
}

func (r *unpacker) uvarint() uint64 {
	var x uint64
	for shift := 0; ; shift += 7 {
		c := r.byte()
		x |= uint64(c&0x7f) << shift
		if c < 0x80 {
			return x
		}
	}
}

func (r *unpacker) varint() int64 {
	u := r.uvarint()
	return int64(u>>1) ^ -int64(u&1) // binary.AppendVarint's zig-zag
}

func (r *unpacker) time() time.Time {
	sec := r.varint()
	return time.Unix(sec, int64(r.uvarint())).UTC()
}

func (r *unpacker) string() string {
	n := int(r.uvarint())
	s := r.s[r.off : r.off+n]
	r.off += n
	return s
}

func (r *unpacker) known() string {
	if i := r.byte(); i != 0 {
		return knownValues[i-1]
	}
	return r.string()
}
