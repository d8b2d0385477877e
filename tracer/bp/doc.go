// Package bp holds rtrace's breakpoints as data: an address-keyed table whose
// entries keep the original byte, the decoded displaced instruction, a kind
// bit-set, and how the displaced instruction runs (decided once, at insertion).
package bp
