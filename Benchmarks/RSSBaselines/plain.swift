// RSS baseline: the Swift runtime alone.
import Glibc
print("ready")
sleep(3)
