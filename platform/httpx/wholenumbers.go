package httpx

import (
	"encoding"
	"errors"
	"fmt"
	"math"
	"reflect"
	"strconv"
	"strings"
	"time"

	"github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"
)

// JSON Schema counts 5.0 and 5e0 as integers, and so does huma's validation, but json/v2 decodes
// only the plain form (5) into a Go integer: {"gracePeriodSeconds": 5.0} passed validation and was
// then refused as "cannot be a number". wholeNumbers, an unmarshaler for every Go value, takes over
// every JSON number that goes into an integer kind (int…int64, uint…uintptr, named or not): its
// exact decimal value is stored when it is whole and fits the type, and otherwise the error says
// which of the two it is not.

var (
	unmarshalerType     = reflect.TypeFor[json.Unmarshaler]()
	unmarshalerFromType = reflect.TypeFor[json.UnmarshalerFrom]()
	textUnmarshalerType = reflect.TypeFor[encoding.TextUnmarshaler]()
	// durationType has json/v2's own formats (format:sec takes 1.5); it is left to them.
	durationType = reflect.TypeFor[time.Duration]()
)

// integerError is why a JSON number cannot go into an integer field; decodeError names the field.
type integerError struct{ message string }

func (e *integerError) Error() string { return e.message }

var errNotWhole = &integerError{"must be an integer"}

// wholeNumbers decodes a JSON number into an integer of any kind. Any other value, a type with its
// own unmarshaling method, or a time.Duration is left to json/v2 (errors.ErrUnsupported, before
// reading anything).
func wholeNumbers(dec *jsontext.Decoder, v any) error {
	rv := reflect.ValueOf(v).Elem()
	signed := false
	switch rv.Kind() {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		signed = true
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
	default:
		return errors.ErrUnsupported
	}
	if pt := reflect.PointerTo(rv.Type()); rv.Type() == durationType || pt.Implements(unmarshalerType) ||
		pt.Implements(unmarshalerFromType) || pt.Implements(textUnmarshalerType) || dec.PeekKind() != '0' {
		return errors.ErrUnsupported
	}
	num, err := dec.ReadValue()
	if err != nil {
		return err
	}
	bits := rv.Type().Bits()
	digits, neg, whole := integerOf(string(num))
	switch {
	case !whole:
		return errNotWhole
	case signed:
		n, err := strconv.ParseInt(sign(neg)+digits, 10, bits)
		if err != nil {
			lowest := int64(-1) << (bits - 1)
			return outOfRange(strconv.FormatInt(lowest, 10), strconv.FormatInt(-(lowest+1), 10))
		}
		rv.SetInt(n)
	default:
		n, err := strconv.ParseUint(digits, 10, bits)
		if err != nil || (neg && n != 0) {
			return outOfRange("0", strconv.FormatUint(math.MaxUint64>>(64-bits), 10))
		}
		rv.SetUint(n)
	}
	return nil
}

func outOfRange(lowest, highest string) error {
	return &integerError{fmt.Sprintf("must be an integer from %s to %s", lowest, highest)}
}

func sign(neg bool) string {
	if neg {
		return "-"
	}
	return ""
}

// maxDigits is more digits than any Go integer has (18446744073709551615 has 20).
const maxDigits = 21

// integerOf reads a JSON number (already checked against the JSON grammar) exactly, without
// rounding it through a float: whole reports whether its value is an integer, and digits is then
// its magnitude in plain decimal ("0" for zero), or a string of maxDigits nines when it has more
// digits than any Go integer, so that parsing it reports a range error.
func integerOf(num string) (digits string, neg, whole bool) {
	neg = strings.HasPrefix(num, "-")
	num = strings.TrimPrefix(num, "-")
	mantissa, exp10, hasExp := strings.Cut(num, "e")
	if !hasExp {
		mantissa, exp10, hasExp = strings.Cut(num, "E")
	}
	intPart, frac, _ := strings.Cut(mantissa, ".")
	significant := strings.TrimLeft(intPart+frac, "0")
	if significant == "" {
		return "0", neg, true // 0, 0.0, -0e5: zero whatever the exponent
	}
	trimmed := strings.TrimRight(significant, "0")
	// The value is trimmed × 10^scale.
	scale := int64(len(significant)-len(trimmed)) - int64(len(frac))
	if hasExp {
		e, err := strconv.ParseInt(exp10, 10, 32)
		if err != nil { // beyond ±2³¹: a huge integer, or a tiny non-zero fraction
			return strings.Repeat("9", maxDigits), neg, !strings.HasPrefix(exp10, "-")
		}
		scale += e
	}
	switch {
	case scale < 0: // trimmed ends in a non-zero digit: dividing by 10 leaves a fraction
		return "", neg, false
	case int64(len(trimmed))+scale > maxDigits:
		return strings.Repeat("9", maxDigits), neg, true
	}
	return trimmed + strings.Repeat("0", int(scale)), neg, true
}
