// Who a process is and where it sits among pid namespaces: what /proc says (src/collect/procfs.ts
// reads it), as the document's builder and the agents' join take it.

export interface ProcessInfo {
  user: string | null;
  name: string | null;
  command: string | null;
  uid: number | null;
  /** The parent's pid (/proc/PID/stat): ranks started by one launcher share it. */
  ppid?: number | null;
}

/** Where a process sits among pid namespaces: what a container's pids are joined on. */
export interface PidNsInfo {
  /** /proc/PID/status's NSpid: its pid in the reader's namespace first, its own namespace's pid
   *  (what the process calls itself: os.getpid()) last; null where the line is missing. */
  nspid: number[] | null;
  /** The inode of its pid namespace (/proc/PID/ns/pid: "pid:[N]"); null where unreadable. */
  pid_namespace: number | null;
}
