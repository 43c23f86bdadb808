package openfiles

// scan is lsof's view (openfiles_lsof.go): macOS has no /proc.
func scan(self int, suffixes []string) (*Snapshot, error) {
	return scanLsof(self, suffixes)
}
