// The target's mappings and ELF symbols: where its interpreter and libc are, and the addresses the
// helper calls or writes (cuda/inject_common.h).
#define _GNU_SOURCE
#include "inject_common.h"

#if defined(__x86_64__)
#include <linux/magic.h>
#include <linux/openat2.h>
#include <sys/statfs.h>
#include <sys/sysmacros.h>

#ifndef SYS_openat2
#define SYS_openat2 437
#endif

#define MAX_OBJECTS 2048

struct object {
  char path[4096];
  uint64_t base_map, end_map;  // the mapping at file offset 0
  unsigned dev_major, dev_minor;  // the mapped file's device and inode, as the maps say them
  unsigned long ino;
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
    unsigned long start, end, off, ino;
    unsigned maj, min;
    char perms[8];
    int path_at = 0;
    if (sscanf(line, "%lx-%lx %7s %lx %x:%x %lu %n", &start, &end, perms, &off, &maj, &min, &ino, &path_at) < 7 || path_at == 0) continue;
    char *path = line + path_at;
    path[strcspn(path, "\n")] = 0;
    if (path[0] != '/' || off != 0) continue;
    int seen = 0;
    for (int i = 0; i < n_objects; i++) seen |= strcmp(objects[i].path, path) == 0;
    if (seen || n_objects == MAX_OBJECTS) continue;
    snprintf(objects[n_objects].path, sizeof objects[n_objects].path, "%s", path);
    objects[n_objects].base_map = start;
    objects[n_objects].end_map = end;
    objects[n_objects].dev_major = maj;
    objects[n_objects].dev_minor = min;
    objects[n_objects++].ino = ino;
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

// What kind of file st is, in words, for a refusal.
static const char *file_kind(mode_t m) {
  if (S_ISFIFO(m)) return "a FIFO";
  if (S_ISLNK(m)) return "a symbolic link";
  if (S_ISCHR(m) || S_ISBLK(m)) return "a device";
  if (S_ISDIR(m)) return "a directory";
  if (S_ISSOCK(m)) return "a socket";
  return "not a regular file";
}

// Whether st is the file the maps line o names: same inode, same device. Overlayfs (containers'
// usual root) is the exception for the device: a mapping there shows its layer's device and inode,
// a stat through the overlay the overlay's own device with the layer's inode number.
static int is_mapped_file(int fd, const struct stat *st, const struct object *o) {
  if ((unsigned long)st->st_ino != o->ino) return 0;
  if (major(st->st_dev) == o->dev_major && minor(st->st_dev) == o->dev_minor) return 1;
  struct statfs fs;
  return fstatfs(fd, &fs) == 0 && fs.f_type == OVERLAYFS_SUPER_MAGIC;
}

// openat2(2) (Linux 5.6+): glibc has no wrapper before 2.40.
static int open_in_root(int root, const char *path) {
  struct open_how how = {.flags = O_PATH | O_NOFOLLOW | O_CLOEXEC, .resolve = RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS};
  return (int)syscall(SYS_openat2, root, path, &how, sizeof how);
}

// The file behind the target's mapping o, opened to read: never by a name resolved outside the
// target's root, never blocking, and never anything but the regular file that is mapped. A name
// in the maps is only a hint that another user may have planted something at (a FIFO, where an
// open blocks for ever, in place of a deleted `python3 (deleted)`; a symbolic link to a host file;
// a device), so the file is reached, in this order:
//  1. /proc/PID/map_files/START-END: the mapped file itself, deleted or renamed or not. Following
//     these links needs CAP_SYS_ADMIN (CAP_CHECKPOINT_RESTORE since Linux 5.9) in the initial user
//     namespace: root has it, a same-uid attacher gets EPERM (seen on 6.x as a setpriv'd uid).
//  2. /proc/PID/exe for the executable: as exact, with ptrace access only (same uid).
//  3. The name inside the target's root: openat2 from /proc/PID/root with RESOLVE_IN_ROOT (an
//     absolute link or ".." stays inside that root) and RESOLVE_NO_MAGICLINKS, O_NOFOLLOW on the
//     last part; where the kernel has no openat2, /proc/PID/root/NAME, the identity check below
//     then refusing whatever a link led to.
// Each is opened O_PATH first (a FIFO or a device is never opened at all), must be a regular file
// (and, by 2 and 3, the very inode the maps name), and only then is opened read-only through
// /proc/self/fd (O_NONBLOCK all the same). No way falls back to the name in the helper's own root:
// for a container that would be the host's file. -1 with the reason in why.
static int open_mapped(int pid, const struct object *o, const char *exe, char *why, size_t why_len) {
  char p[4200];
  snprintf(p, sizeof p, "/proc/%d/map_files/%llx-%llx", pid, (unsigned long long)o->base_map, (unsigned long long)o->end_map);
  int fd = open(p, O_PATH | O_CLOEXEC), exact = fd >= 0;
  if (fd < 0 && strcmp(o->path, exe) == 0) {
    snprintf(p, sizeof p, "/proc/%d/exe", pid);
    fd = open(p, O_PATH | O_CLOEXEC);
  }
  if (fd < 0) {
    snprintf(p, sizeof p, "/proc/%d/root", pid);
    int root = open(p, O_PATH | O_DIRECTORY | O_CLOEXEC);
    if (root < 0) {
      snprintf(why, why_len, "cannot open its root (%s)", strerror(errno));
      return -1;
    }
    fd = open_in_root(root, o->path);
    if (fd < 0 && errno == ENOSYS) fd = openat(root, o->path + 1, O_PATH | O_NOFOLLOW | O_CLOEXEC);
    int err = errno;
    close(root);
    if (fd < 0) {
      size_t n = strlen(o->path), d = strlen(" (deleted)");
      if (err == ENOENT && n > d && strcmp(o->path + n - d, " (deleted)") == 0)
        snprintf(why, why_len, "it was deleted since it was loaded, and reading a deleted mapping needs CAP_SYS_ADMIN");
      else
        snprintf(why, why_len, "%s in its root", strerror(err));
      return -1;
    }
  }
  struct stat st;
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    int failed = errno;
    if (exact && fstat(fd, &st) != 0) snprintf(why, why_len, "cannot stat it: %s", strerror(failed));
    else snprintf(why, why_len, "%s at that name, not the mapped file", file_kind(st.st_mode));
    close(fd);
    return -1;
  }
  if (!exact && !is_mapped_file(fd, &st, o)) {
    snprintf(why, why_len, "the file at that name is not the one it mapped (replaced since it was loaded)");
    close(fd);
    return -1;
  }
  snprintf(p, sizeof p, "/proc/self/fd/%d", fd);
  int rd = open(p, O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
  if (rd < 0) snprintf(why, why_len, "cannot read it: %s", strerror(errno));
  close(fd);
  return rd;
}

// The ELF file of the mapping o, mapped read-only; every offset taken from it is checked against its size.
static int elf_open(int pid, const struct object *o, const char *exe, struct elf *e, char *why, size_t why_len) {
  int fd = open_mapped(pid, o, exe, why, why_len);
  if (fd < 0) return -1;
  struct stat st;
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || st.st_size < (off_t)sizeof(Elf64_Ehdr)) {
    snprintf(why, why_len, "not an ELF file");
    close(fd);
    return -1;
  }
  void *m = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
  close(fd);
  if (m == MAP_FAILED) {
    snprintf(why, why_len, "cannot map it: %s", strerror(errno));
    return -1;
  }
  e->data = m;
  e->size = (size_t)st.st_size;
  const Elf64_Ehdr *h = (const Elf64_Ehdr *)e->data;
  if (memcmp(h->e_ident, ELFMAG, SELFMAG) != 0 || h->e_ident[EI_CLASS] != ELFCLASS64 || h->e_machine != EM_X86_64 ||
      h->e_shentsize != sizeof(Elf64_Shdr) || h->e_phentsize != sizeof(Elf64_Phdr) ||
      !in_file(e, h->e_shoff, (uint64_t)h->e_shnum * sizeof(Elf64_Shdr)) || !in_file(e, h->e_phoff, (uint64_t)h->e_phnum * sizeof(Elf64_Phdr))) {
    munmap((void *)e->data, e->size);
    snprintf(why, why_len, "not an x86-64 ELF file");
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

// /proc/PID/stat's fields from the third (the state letter) on, read into buf: the command name
// before them may hold spaces and parentheses. NULL where it cannot be read (the process is gone).
const char *stat_fields(int pid, char *buf, size_t len) {
  char p[64];
  snprintf(p, sizeof p, "/proc/%d/stat", pid);
  int fd = open(p, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return NULL;
  ssize_t n = read(fd, buf, len - 1);
  close(fd);
  if (n <= 0) return NULL;
  buf[n] = 0;
  const char *s = strrchr(buf, ')');
  return s && s[1] == ' ' ? s + 2 : NULL;
}

// PF_KTHREAD in /proc/PID/stat's flags (field 9). An unreadable stat means the process is gone:
// not a kernel thread.
static int is_kernel_thread(int pid) {
  char buf[1024];
  const char *f = stat_fields(pid, buf, sizeof buf);
  unsigned long flags = 0;
  if (!f || sscanf(f, "%*c %*d %*d %*d %*d %*d %lu", &flags) != 1) return 0;
  return (flags & 0x00200000UL) != 0;
}

// Field 22 of /proc/PID/stat: when the process started, in clock ticks after boot (src/collect/procfs.ts
// startTicks, the monitor's reading); 0 where it cannot be read.
static unsigned long long start_ticks(int pid) {
  char buf[1024];
  const char *f = stat_fields(pid, buf, sizeof buf);
  unsigned long long start = 0;
  if (!f || sscanf(f, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %*u %*u %*d %*d %*d %*d %*d %*d %llu", &start) != 1) return 0;
  return start;
}

unsigned long long asked_start;

// Whether pid is still the process the monitor asked for (--start-time): 0 where it is, or where no
// start time was given; else EXIT_EXITED or EXIT_NOT_SAME, the line in why. A pid is given again
// only once its process was reaped, and the later process starts later, so the same start time is
// the same process. The answer holds only while something pins the pid: the callers say what does.
int not_asked_for(int pid, char *why, size_t why_len) {
  if (!asked_start) return 0;
  unsigned long long now = start_ticks(pid);
  if (!now) {
    snprintf(why, why_len, "process %d exited during the attach", pid);
    return EXIT_EXITED;
  }
  if (now == asked_start) return 0;
  double hz = (double)sysconf(_SC_CLK_TCK);
  snprintf(why, why_len, "process %d is no longer the process asked for (started at %.2f s after boot, not %.2f s): nothing was done to it", pid,
           (double)now / hz, (double)asked_start / hz);
  return EXIT_NOT_SAME;
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
  // Why an interpreter or C library file could not be read, the first of each: said where none was.
  char interp_why[512] = "", interp_path[4096] = "", libc_why[512] = "", libc_path[4096] = "";
  for (int i = 0; i < n_objects; i++) {
    const char *path = objects[i].path;
    int interp = (strcmp(path, exe) == 0 || strstr(base_name(path), "libpython") == base_name(path)) && !t->pending_call;
    int libc = is_libc(path) && !t->libc_mmap;
    if (!interp && !libc) continue;  // only what is still looked for is opened
    struct elf e = {0};
    char why[512];
    if (elf_open(pid, &objects[i], exe, &e, why, sizeof why) != 0) {
      if (interp && !interp_why[0]) {
        snprintf(interp_why, sizeof interp_why, "%s", why);
        snprintf(interp_path, sizeof interp_path, "%.4000s", path);
      }
      if (libc && !libc_why[0]) {
        snprintf(libc_why, sizeof libc_why, "%s", why);
        snprintf(libc_path, sizeof libc_path, "%.4000s", path);
      }
      continue;
    }
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
  if (!t->pending_call && interp_why[0]) die(EXIT_UNREADABLE, "cannot read process %d's interpreter %s: %s; nothing was done to it", pid, interp_path, interp_why);
  if (!t->libc_mmap && libc_why[0]) die(EXIT_UNREADABLE, "cannot read process %d's C library %s: %s; nothing was done to it", pid, libc_path, libc_why);
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
    // The executable's name as /proc/PID/exe says it: a name only, never resolved here (in the
    // helper's root it could be another file, or none).
    if (version_from_name(exe, &t->major, &t->minor) != 0)
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
