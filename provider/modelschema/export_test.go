package modelschema

// HeldMisses is how many misses the registry holds (the bound's test).
func (r *Registry) HeldMisses() int {
	n, _ := r.misses.Len()
	return n
}
