// placeholder, replaced by the real daemon
int main() { return 0; }
