package file_test

import "os/exec"

// asNobody: Windows has no root to step down from (os.Geteuid is -1 there,
// so TestListUnreadableFolder never runs a child).
func asNobody(*exec.Cmd) {}
