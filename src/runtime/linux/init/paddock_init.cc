// placeholder, replaced by the real init
int main() { return 0; }
