// leakymain: runs leaky.c built as a shared library (-DLEAKY_LIB), so that
// the leaks' backtraces pass through library frames.
int leaky_main(void);

int main(void) { return leaky_main(); }
