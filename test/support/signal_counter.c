// A program that counts the SIGINTs and SIGTERMs it receives, for the tests of `run`'s signals.
// It writes "ready PARENT_PID" to FILE, waits for a first signal, gives others 1.5 s to come, then
// writes "INT n TERM m" to FILE and exits 0. A C handler counts every delivery (a Python or shell
// handler may run once for two signals that arrive close together).
#define _POSIX_C_SOURCE 200809L
#include <signal.h>
#include <stdio.h>
#include <time.h>
#include <unistd.h>

static volatile sig_atomic_t ints, terms;

static void on_signal(int sig) {
  if (sig == SIGINT) ints++;
  else terms++;
}

static void say(const char* file, const char* text) {
  char tmp[4096];
  snprintf(tmp, sizeof tmp, "%s.tmp", file);
  FILE* f = fopen(tmp, "w");
  if (!f) return;
  fputs(text, f);
  fclose(f);
  rename(tmp, file); // whole lines only, for the test that polls FILE
}

int main(int argc, char** argv) {
  if (argc != 2) return 2;
  struct sigaction sa = {0};
  sa.sa_handler = on_signal;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGINT, &sa, NULL);
  sigaction(SIGTERM, &sa, NULL);
  char line[64];
  snprintf(line, sizeof line, "ready %d\n", (int)getppid());
  say(argv[1], line);
  struct timespec tick = {0, 10 * 1000 * 1000};
  while (ints + terms == 0) nanosleep(&tick, NULL);
  for (int i = 0; i < 150; i++) nanosleep(&tick, NULL);
  snprintf(line, sizeof line, "INT %d TERM %d\n", (int)ints, (int)terms);
  say(argv[1], line);
  return 0;
}
