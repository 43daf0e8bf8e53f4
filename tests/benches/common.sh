# Shell helpers the benches in this folder share (sourced, not run).

# One line naming this machine's CPU: `cpu family : 25 model : 17 model name : AMD EPYC`.
print_cpu() {
    grep -E "cpu family|^model\s" /proc/cpuinfo | sort -u | tr '\n' ' '
    echo
}

# The median of the numbers on standard input, one per line.
median() {
    sort -g | awk '{a[NR]=$1} END {print (NR%2) ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2}'
}
