package session

// Internals the external tests reach.

// NewIndexHooked is NewIndex with read called between reading copies.
func (f Format) NewIndexHooked(budget int64, read func(), srcs ...Source) (*Index, error) {
	return f.newIndex(budget, read, srcs...)
}
