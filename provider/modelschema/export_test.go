package modelschema

// HeldMisses is how many misses the registry holds (the bound's test).
func (r *Registry) HeldMisses() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.misses)
}
