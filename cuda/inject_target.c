// The target's mappings and ELF symbols: where its interpreter and libc are, and the addresses the
// helper calls or writes (cuda/inject_common.h).
#define _GNU_SOURCE
#include "inject_common.h"

#if defined(__x86_64__)

#define MAX_OBJECTS 2048

struct object {
  char path[4096];
  uint64_t base_map;  // start of the mapping at file offset 0
};

static struct object objects[MAX_OBJECTS];
static int n_objects;

static int read_maps(int pid) {
  char p[64];
  snprintf(p, sizeof p, "/proc/%d/maps", pid);
  FILE *f = fopen(p, "r");
  if (!f) return -1;
  char line[4096 + 256];
  while (fgets(line, sizeof line, f)) {
    unsigned long start, end, off;
    char perms[8];
    int path_at = 0;
    if (sscanf(line, "%lx-%lx %7s %lx %*s %*s %n", &start, &end, perms, &off, &path_at) < 4 || path_at == 0) continue;
    char *path = line + path_at;
    path[strcspn(path, "\n")] = 0;
    if (path[0] != '/' || off != 0) continue;
    int seen = 0;
    for (int i = 0; i < n_objects; i++) seen |= strcmp(objects[i].path, path) == 0;
    if (seen || n_objects == MAX_OBJECTS) continue;
    snprintf(objects[n_objects].path, sizeof objects[n_objects].path, "%s", path);
    objects[n_objects++].base_map = start;
  }
  fclose(f);
  return 0;
}

// An ELF file mapped read-only; every offset taken from it is checked against its size.
struct elf {
  const uint8_t *data;
  size_t size;
};

static int in_file(const struct elf *e, uint64_t off, uint64_t len) {
  return off <= e->size && len <= e->size - off;
}

static int elf_open(int pid, const char *path, struct elf *e) {
  // The path as the target sees it (another mount namespace: a container).
  char p[4200];
  snprintf(p, sizeof p, "/proc/%d/root%.4000s", pid, path);
  int fd = open(p, O_RDONLY | O_CLOEXEC);
  if (fd < 0) fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return -1;
  struct stat st;
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || st.st_size < (off_t)sizeof(Elf64_Ehdr)) {
    close(fd);
    return -1;
  }
  void *m = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
  close(fd);
  if (m == MAP_FAILED) return -1;
  e->data = m;
  e->size = (size_t)st.st_size;
  const Elf64_Ehdr *h = (const Elf64_Ehdr *)e->data;
  if (memcmp(h->e_ident, ELFMAG, SELFMAG) != 0 || h->e_ident[EI_CLASS] != ELFCLASS64 || h->e_machine != EM_X86_64 ||
      h->e_shentsize != sizeof(Elf64_Shdr) || h->e_phentsize != sizeof(Elf64_Phdr) ||
      !in_file(e, h->e_shoff, (uint64_t)h->e_shnum * sizeof(Elf64_Shdr)) || !in_file(e, h->e_phoff, (uint64_t)h->e_phnum * sizeof(Elf64_Phdr))) {
    munmap((void *)e->data, e->size);
    return -1;
  }
  return 0;
}

static void elf_close(struct elf *e) {
  if (e->data) munmap((void *)e->data, e->size);
  e->data = NULL;
}

// The lowest PT_LOAD address, page-aligned: what the mapping at offset 0 corresponds to.
static uint64_t elf_min_vaddr(const struct elf *e) {
  const Elf64_Ehdr *h = (const Elf64_Ehdr *)e->data;
  const Elf64_Phdr *ph = (const Elf64_Phdr *)(e->data + h->e_phoff);
  uint64_t min = UINT64_MAX;
  for (int i = 0; i < h->e_phnum; i++)
    if (ph[i].p_type == PT_LOAD && ph[i].p_vaddr < min) min = ph[i].p_vaddr;
  return min == UINT64_MAX ? 0 : min & ~(uint64_t)0xfff;
}

// A defined symbol's link-time value in .dynsym, or 0.
static uint64_t elf_dynsym(const struct elf *e, const char *name, uint64_t *size) {
  const Elf64_Ehdr *h = (const Elf64_Ehdr *)e->data;
  const Elf64_Shdr *sh = (const Elf64_Shdr *)(e->data + h->e_shoff);
  for (int i = 0; i < h->e_shnum; i++) {
    if (sh[i].sh_type != SHT_DYNSYM || sh[i].sh_link >= h->e_shnum) continue;
    const Elf64_Shdr *str = &sh[sh[i].sh_link];
    if (!in_file(e, sh[i].sh_offset, sh[i].sh_size) || !in_file(e, str->sh_offset, str->sh_size)) return 0;
    const Elf64_Sym *syms = (const Elf64_Sym *)(e->data + sh[i].sh_offset);
    const char *strs = (const char *)(e->data + str->sh_offset);
    size_t n = sh[i].sh_size / sizeof(Elf64_Sym), nlen = strlen(name);
    for (size_t k = 0; k < n; k++) {
      if (syms[k].st_shndx == SHN_UNDEF || syms[k].st_value == 0) continue;
      uint64_t at = syms[k].st_name;
      if (at >= str->sh_size || str->sh_size - at < nlen + 1) continue;
      if (memcmp(strs + at, name, nlen + 1) == 0) {
        if (size) *size = syms[k].st_size;
        return syms[k].st_value;
      }
    }
  }
  return 0;
}

// A section's link-time address, by name (through the section-name string table), or 0.
static uint64_t elf_section(const struct elf *e, const char *name, uint64_t *size) {
  const Elf64_Ehdr *h = (const Elf64_Ehdr *)e->data;
  const Elf64_Shdr *sh = (const Elf64_Shdr *)(e->data + h->e_shoff);
  if (h->e_shstrndx >= h->e_shnum) return 0;
  const Elf64_Shdr *names = &sh[h->e_shstrndx];
  if (!in_file(e, names->sh_offset, names->sh_size)) return 0;
  size_t nlen = strlen(name);
  for (int i = 0; i < h->e_shnum; i++) {
    uint64_t at = sh[i].sh_name;
    if (at >= names->sh_size || names->sh_size - at < nlen + 1) continue;
    if (memcmp(e->data + names->sh_offset + at, name, nlen + 1) == 0 && sh[i].sh_addr) {
      if (size) *size = sh[i].sh_size;
      return sh[i].sh_addr;
    }
  }
  return 0;
}

static const char *base_name(const char *p) {
  const char *s = strrchr(p, '/');
  return s ? s + 1 : p;
}

static int is_libc(const char *path) {
  const char *b = base_name(path);
  return strncmp(b, "libc.so", 7) == 0 || strncmp(b, "libc-", 5) == 0 || strncmp(b, "ld-musl-", 8) == 0;
}


// Reads or writes len bytes of pid's memory at addr: process_vm_readv/writev, or /proc/PID/mem where
// those are refused (a page the target maps without the access asked, which ptrace may still reach).
static int target_io(int pid, uint64_t addr, void *buf, size_t len, int write) {
  struct iovec local = {buf, len}, remote = {(void *)addr, len};
  ssize_t n = write ? process_vm_writev(pid, &local, 1, &remote, 1, 0) : process_vm_readv(pid, &local, 1, &remote, 1, 0);
  if (n == (ssize_t)len) return 0;
  char p[64];
  snprintf(p, sizeof p, "/proc/%d/mem", pid);
  int fd = open(p, (write ? O_WRONLY : O_RDONLY) | O_CLOEXEC);
  if (fd < 0) return -1;
  ssize_t r = write ? pwrite(fd, buf, len, (off_t)addr) : pread(fd, buf, len, (off_t)addr);
  close(fd);
  return r == (ssize_t)len ? 0 : -1;
}

int read_target(int pid, uint64_t addr, void *buf, size_t len) { return target_io(pid, addr, buf, len, 0); }

int write_target(int pid, uint64_t addr, const void *buf, size_t len) { return target_io(pid, addr, (void *)buf, len, 1); }

// "python3.10", "libpython3.9.so.1.0": the version in an interpreter's file name, where it says one.
static int version_from_name(const char *path, int *major, int *minor) {
  const char *b = base_name(path);
  const char *p = strstr(b, "python");
  if (!p) return -1;
  return sscanf(p, "python%d.%d", major, minor) == 2 ? 0 : -1;
}

// PF_KTHREAD in /proc/PID/stat's flags (field 9). An unreadable stat means the process is gone:
// not a kernel thread.
static int is_kernel_thread(int pid) {
  char p[64], buf[1024];
  snprintf(p, sizeof p, "/proc/%d/stat", pid);
  int fd = open(p, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return 0;
  ssize_t n = read(fd, buf, sizeof buf - 1);
  close(fd);
  if (n <= 0) return 0;
  buf[n] = 0;
  const char *s = strrchr(buf, ')');  // the command name may hold spaces and parentheses
  unsigned long flags = 0;
  if (!s || sscanf(s + 2, "%*c %*d %*d %*d %*d %*d %lu", &flags) != 1) return 0;
  return (flags & 0x00200000UL) != 0;
}

void find_target(int pid, struct target *t) {
  memset(t, 0, sizeof *t);
  t->pid = pid;
  char p[64];
  snprintf(p, sizeof p, "/proc/%d", pid);
  struct stat st;
  if (stat(p, &st) != 0) die(EXIT_NO_PROCESS, "no process %d", pid);
  if (read_maps(pid) != 0) {
    int err = errno;
    if (stat(p, &st) != 0) die(EXIT_EXITED, "process %d exited during the attach", pid);
    die(EXIT_PTRACE, "cannot read /proc/%d/maps: %s", pid, strerror(err));
  }
  // No mapping at all: a kernel thread, or a process between exit_mm() and becoming a zombie.
  if (n_objects == 0) {
    if (is_kernel_thread(pid)) die(EXIT_NOT_PYTHON, "process %d is a kernel thread", pid);
    die(EXIT_EXITED, "process %d exited during the attach", pid);
  }
  char exe[4096] = "";
  snprintf(p, sizeof p, "/proc/%d/exe", pid);
  ssize_t n = readlink(p, exe, sizeof exe - 1);
  if (n > 0) exe[n] = 0;
  for (int i = 0; i < n_objects; i++) {
    const char *path = objects[i].path;
    int interp = strcmp(path, exe) == 0 || strstr(base_name(path), "libpython") == base_name(path);
    int libc = is_libc(path);
    if (!interp && !libc) continue;
    struct elf e = {0};
    if (elf_open(pid, path, &e) != 0) continue;
    uint64_t bias = objects[i].base_map - elf_min_vaddr(&e);
    if (interp && !t->pending_call) {
      uint64_t pc = elf_dynsym(&e, "Py_AddPendingCall", NULL), rs = elf_dynsym(&e, "PyRun_SimpleString", NULL);
      if (pc && rs) {
        t->pending_call = bias + pc;
        t->run_simple_string = bias + rs;
        uint64_t v = elf_dynsym(&e, "Py_Version", NULL);
        t->py_version_addr = v ? bias + v : 0;
        // PEP 768's way (Doc/howto/remote_debugging.rst): the `.PyRuntime` section, else the symbol.
        uint64_t rt = elf_section(&e, ".PyRuntime", NULL);
        if (!rt) rt = elf_dynsym(&e, "_PyRuntime", NULL);
        t->runtime = rt ? bias + rt : 0;
        snprintf(t->python_object, sizeof t->python_object, "%.4000s", path);
      }
    }
    if (libc && !t->libc_mmap) {
      uint64_t m = elf_dynsym(&e, "mmap", NULL), u = elf_dynsym(&e, "munmap", NULL);
      if (m && u) {
        t->libc_mmap = bias + m;
        t->libc_munmap = bias + u;
      }
    }
    elf_close(&e);
  }
  if (!t->pending_call) die(EXIT_NOT_PYTHON, "process %d is not a CPython process (no Py_AddPendingCall in its executable or a libpython)", pid);
  if (!t->libc_mmap) die(EXIT_NOT_PYTHON, "process %d: no C library with mmap found among its mappings", pid);
  if (t->py_version_addr) {
    uint32_t hex = 0;
    if (read_target(pid, t->py_version_addr, &hex, sizeof hex) != 0)
      die(EXIT_PTRACE, "cannot read process %d's memory: %s", pid, strerror(errno));
    t->major = (int)(hex >> 24) & 0xff;
    t->minor = (int)(hex >> 16) & 0xff;
    t->micro = (int)(hex >> 8) & 0xff;
  } else if (version_from_name(t->python_object, &t->major, &t->minor) != 0) {
    char real[4096];
    snprintf(p, sizeof p, "/proc/%d/exe", pid);
    if (realpath(p, real) == NULL || version_from_name(real, &t->major, &t->minor) != 0)
      die(EXIT_VERSION, "cannot tell which Python process %d runs (no Py_Version, no version in %s)", pid, t->python_object);
    t->micro = -1;
  } else {
    t->micro = -1;
  }
}

void print_version(char *out, size_t len, const struct target *t) {
  if (t->micro >= 0) snprintf(out, len, "%d.%d.%d", t->major, t->minor, t->micro);
  else snprintf(out, len, "%d.%d", t->major, t->minor);
}
#endif
