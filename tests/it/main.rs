mod containers;
