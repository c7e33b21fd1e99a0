// Placeholder until the CPU backend lands.
