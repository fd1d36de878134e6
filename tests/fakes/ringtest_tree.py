"""A stand-in kernel tree holding only a ``tools/virtio/ringtest`` of our own.

It has the shape ringlab relies on (a Makefile whose programs link ``PROG.o
main.o``, a source that includes ``../../../include/linux/ptr_ring.h``), so
the ringtest experiment's build and run paths are tested without a kernel
tree.  The programs do no ring work: they accept ringtest's long options,
optionally record their argv, and exit.  Knobs (environment):

  FAKE_RINGTEST_ARGV=PATH   append the argv (one line, space-separated) to PATH
  FAKE_RINGTEST_EXIT=CODE   exit with CODE after writing a message to stderr
  FAKE_RINGTEST_ABORT=1     abort() (SIGABRT), as ringtest's assert() does
"""
from __future__ import annotations

from pathlib import Path

MAKEFILE = """\
all: ptr_ring noring

CFLAGS += -O1 -Wall
ptr_ring.o: ptr_ring.c main.h ../../../include/linux/ptr_ring.h
noring.o: noring.c main.h
ptr_ring: ptr_ring.o main.o
noring: noring.o main.o
broken: broken.o main.o
clean:
\t-rm -f *.o ptr_ring noring broken

.PHONY: all clean
"""

MAIN_H = """\
#ifndef FAKE_MAIN_H
#define FAKE_MAIN_H
/* the ring program provides its name; main() does the rest */
extern const char *fake_ring_name;
#endif
"""

MAIN_C = r"""
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "main.h"

int main(int argc, char **argv)
{
	const char *path = getenv("FAKE_RINGTEST_ARGV");
	const char *code = getenv("FAKE_RINGTEST_EXIT");
	int i;

	if (path) {
		FILE *f = fopen(path, "a");
		if (f) {
			fprintf(f, "%s", fake_ring_name);
			for (i = 1; i < argc; i++)
				fprintf(f, " %s", argv[i]);
			fprintf(f, "\n");
			fclose(f);
		}
	}
	if (getenv("FAKE_RINGTEST_ABORT"))
		abort();
	if (code) {
		fprintf(stderr, "%s: failing on request\n", fake_ring_name);
		return atoi(code);
	}
	return 0;
}
"""

HEADER = "#define FAKE_RING_GENERATION {gen}\n"


def write_fake_ringtest_tree(root: Path, generation: int = 1, broken: bool = False) -> Path:
    """Write the fake tree under ``root``; ``generation`` changes the included header."""
    rt = Path(root) / "tools" / "virtio" / "ringtest"
    rt.mkdir(parents=True, exist_ok=True)
    (rt / "Makefile").write_text(MAKEFILE)
    (rt / "main.h").write_text(MAIN_H)
    (rt / "main.c").write_text(MAIN_C)
    (rt / "ptr_ring.c").write_text('#include "main.h"\n#include "../../../include/linux/ptr_ring.h"\n'
                                   'const char *fake_ring_name = "ptr_ring";\n'
                                   'int fake_generation = FAKE_RING_GENERATION;\n')
    (rt / "noring.c").write_text('#include "main.h"\nconst char *fake_ring_name = "noring";\n')
    if broken:
        (rt / "broken.c").write_text('#include "main.h"\nconst char *fake_ring_name = "broken"\n'
                                     'this does not compile;\n')
    inc = Path(root) / "include" / "linux"
    inc.mkdir(parents=True, exist_ok=True)
    (inc / "ptr_ring.h").write_text(HEADER.format(gen=generation))
    return Path(root)
