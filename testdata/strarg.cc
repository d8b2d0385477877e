// strarg: a std::string argument, recorded with the /S format.
#include <cstdio>
#include <string>

int count(const std::string &s) { return (int)s.size(); }

int main()
{
	std::string s("hello world");
	std::printf("strarg %d\n", count(s));
	return 0;
}
